package sqlitestore_test

import (
	"context"
	"database/sql"
	"errors"
	"runtime"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

// A context that ends while the Write's transaction is open is reported as
// that context's error, whatever failed because of it: here database/sql
// rolls the transaction back when the context ends during the App function,
// and the commit fails with sql.ErrTxDone, which translate must report as
// context.Canceled (the driver's error kept in the chain). Nothing of the
// Write is stored.
func TestContextEndedDuringTheAppIsTheContextError(t *testing.T) {
	is := is.New(t)
	s := mustOpen(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := begin("acme")
	var rolledBack bool
	w.App = func(_ context.Context, tx turnframe.Tx) error {
		stx, ok := sqlitestore.SQLTx(tx)
		if !ok {
			return errors.New("not a sqlite transaction")
		}
		cancel()
		// database/sql rolls the transaction back on a goroutine of its own
		// once the context ended: wait until it did, so the commit meets it.
		for range 1_000_000 {
			if _, err := stx.ExecContext(context.Background(), `SELECT 1`); errors.Is(err, sql.ErrTxDone) {
				rolledBack = true
				break
			}
			runtime.Gosched()
		}
		return nil
	}
	_, err := s.Apply(ctx, w)
	is.True(rolledBack)                       // the context's end rolled the transaction back
	is.True(errors.Is(err, context.Canceled)) // reported as the context's error
	is.True(errors.Is(err, sql.ErrTxDone))    // the cause kept in the chain
	_, err = s.LoadTurn(context.Background(), "acme", w.Turn)
	is.True(errors.Is(err, turnframe.ErrNotFound)) // nothing of the Write stored
}
