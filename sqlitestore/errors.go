package sqlitestore

import (
	"context"
	"errors"
	"fmt"

	"github.com/turnframe/turnframe"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// translate turns a driver error into the error the caller can act on: a
// cancelled or expired context is that context error; a UNIQUE or PRIMARY
// KEY violation is turnframe.ErrConflict; a lock that outlasted the busy
// timeout is ErrBusy. The driver's error stays in the chain. Errors that are
// already turnframe's pass unchanged.
func translate(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w: %w", cerr, err)
	}
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return err
	}
	switch code := se.Code(); {
	case code == sqlite3.SQLITE_CONSTRAINT_UNIQUE || code == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
		return fmt.Errorf("%w: %w", turnframe.ErrConflict, err)
	case code&0xff == sqlite3.SQLITE_BUSY:
		return fmt.Errorf("%w: another connection held the write lock past the busy timeout: %w", ErrBusy, err)
	}
	return err
}

// fail wraps err for the operation op at the API boundary.
func fail(ctx context.Context, op string, err error) error {
	return fmt.Errorf("sqlitestore: %s: %w", op, translate(ctx, err))
}
