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
// timeout (SQLITE_BUSY, or SQLITE_LOCKED: a lock held on the same file
// through another connection of a shared cache or a conflicting statement)
// is turnframe.ErrBusy, and so is a write the file system refused
// (SQLITE_FULL, SQLITE_IOERR_WRITE: a full disk), which commits nothing.
// The driver's error stays in the chain. Errors that are already
// turnframe's pass unchanged, and so does an App function's error
// (turnframe.ErrAppWrite): an app's UNIQUE violation is not ErrConflict.
func translate(ctx context.Context, err error) error {
	if err == nil {
		return err
	}
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		// An App's statement the context cut too: its error says
		// "interrupted", and the caller asked for the context's.
		return fmt.Errorf("%w: %w", cerr, err)
	}
	if errors.Is(err, turnframe.ErrAppWrite) {
		return err // the app's own error: not the store's to classify
	}
	var se *sqlite.Error
	if !errors.As(err, &se) || errors.Is(err, turnframe.ErrConflict) || errors.Is(err, turnframe.ErrBusy) {
		return err // not the driver's, or translated already
	}
	switch code := se.Code(); {
	case code == sqlite3.SQLITE_CONSTRAINT_UNIQUE || code == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
		return fmt.Errorf("%w: %w", turnframe.ErrConflict, err)
	case code&0xff == sqlite3.SQLITE_BUSY:
		return fmt.Errorf("%w: another connection held the write lock past the busy timeout: %w", ErrBusy, err)
	case code&0xff == sqlite3.SQLITE_LOCKED:
		return fmt.Errorf("%w: a lock on the file or a table was held through another connection or statement: %w", ErrBusy, err)
	case code&0xff == sqlite3.SQLITE_FULL || code == sqlite3.SQLITE_IOERR_WRITE:
		// The file system refused a write (no space left, a file size
		// limit). In WAL mode a write reaches the file at a spill or at
		// COMMIT, and a failed one commits nothing: SQLite rolls the
		// transaction back, and the same call may land once space is freed.
		return fmt.Errorf("%w: the file system refused a write (is the disk full?); nothing was written: %w", ErrBusy, err)
	case code&0xff == sqlite3.SQLITE_READONLY:
		// SQLite opened the file read-only, without a word, because this
		// process may not write it: no sentinel, as no retry mends it.
		return fmt.Errorf("the file is read-only for this process (its permissions, an immutable file, a read-only file system); nothing was written: %w", err)
	}
	return err
}
