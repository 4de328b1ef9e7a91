package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/turnframe/turnframe"
)

// appTx is the turnframe.Tx a Write's App function is handed: the Write's
// own transaction.
type appTx struct{ tx pgx.Tx }

// Backend returns "postgres".
func (appTx) Backend() string { return "postgres" }

// PgxTx returns the pgx.Tx behind tx, for an App function
// (turnframe.Write.App, Outcome.With) that writes the application's own
// tables in the same database: the transaction of the Write, which commits
// the app's rows with the journal settlement, events, outbox rows and phase
// move, or rolls them all back. false for a Tx of another store.
//
// Its statements run on the store's connection, with its lock_timeout
// (DefaultLockTimeout on Open's pool): a statement of the app's that waits
// longer for a lock fails, and Apply returns ErrAppWrite with ErrBusy:
// the whole transaction rolled back, nothing written.
//
// Use it only during the App call, and never call the Store from it: the
// transaction holds the locks of the Write (its turn's row, its entries, its
// cases and order keys), and a call that needs one of them waits for a
// commit that cannot come. Do not Commit or Rollback it: Apply does. An
// error of the app's SQL aborts the transaction; return it, and Apply rolls
// everything back. An app that ignores such an error (treating a unique
// violation as "already there", say) loses the whole Write on PostgreSQL,
// where SQLite would go on: Apply then reports ErrAppWrite. Guard such a
// statement with ON CONFLICT, or a savepoint of its own, instead. The app's own tables are its business (schema,
// migrations); they must not be turnframe's.
func PgxTx(tx turnframe.Tx) (pgx.Tx, bool) {
	a, ok := tx.(appTx)
	return a.tx, ok && a.tx != nil
}

// runApp calls w.App, if any, in tx after the Write was written into it
// (its queued statements sent first, so the App finds them run and meets
// none of their errors). The App's error comes back wrapping
// turnframe.ErrAppWrite, which translate leaves as it is, and
// turnframe.ErrBusy too when the app's statement ended the transaction
// for a cause that may pass (rolledBack: a lock refused, a statement
// cancelled by statement_timeout or an operator, a lost connection, the
// server short of a resource) while ctx lives: the whole transaction rolls
// back, nothing is written, and the same call may be tried again — Execute
// tries a command's outcome again on it. Once called, the transaction is
// not retried here.
func runApp(ctx context.Context, tx *wtx, w turnframe.Write) error {
	if w.App == nil {
		return nil
	}
	if tx.app == nil {
		return errors.New("pgstore: a Write with an App in a transaction begun without a pgx.Tx")
	}
	if err := tx.flush(ctx); err != nil {
		return err
	}
	tx.appRan = true
	if err := w.App(ctx, appTx{tx.app}); err != nil {
		// A connection that closed under the App (its session
		// terminated, a failover) took the transaction with it before
		// any COMMIT: the App's statement met the server's FATAL error
		// or a broken socket, neither marked lost (errConnLost).
		if ctx.Err() == nil && (rolledBack(err) || tx.app.Conn().IsClosed()) {
			return fmt.Errorf("%w: %w: %w", turnframe.ErrAppWrite, turnframe.ErrBusy, err)
		}
		return fmt.Errorf("%w: %w", turnframe.ErrAppWrite, err)
	}
	return nil
}
