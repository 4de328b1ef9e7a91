package pgstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
)

// DESIGN.md §6: the App's writes' "error writes nothing ... and Apply
// returns it wrapping ErrAppWrite; ... (an app's UNIQUE violation is not
// ErrConflict)". An application table whose constraint is DEFERRABLE
// INITIALLY DEFERRED (ordinary PostgreSQL) reports the App's violation at
// the COMMIT, after the App returned: pgstore translates it to ErrConflict,
// the store's "a move the state machine refuses, a case that moved" — and
// Execute answers a commit's ErrConflict by reading the case again and, if
// it moved meanwhile, running the handler again.
func TestAnAppsDeferredViolationIsErrAppWriteNotConflict(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s := mustOpen(t, pgstore.WithClock(pgstore.CallerClock))
	_, err := s.Pool().Exec(ctx, `CREATE TABLE bookings (seat text, CONSTRAINT one_per_seat UNIQUE (seat) DEFERRABLE INITIALLY DEFERRED)`)
	is.NoErr(err)
	_, err = s.Pool().Exec(ctx, `INSERT INTO bookings (seat) VALUES ('1A')`)
	is.NoErr(err)

	ids := turnframe.NewIDGenerator()
	turn := ids.TurnID(base)
	_, err = s.Apply(ctx, turnframe.Write{Account: "acme", Turn: turn, Now: base,
		Begin: &turnframe.StoredTurn{Account: "acme", ID: turn, Conversation: ids.ConversationID(base), Text: "book"},
		App: func(ctx context.Context, tx turnframe.Tx) error {
			ptx, _ := pgstore.PgxTx(tx)
			_, err := ptx.Exec(ctx, `INSERT INTO bookings (seat) VALUES ('1A')`) // checked at the commit
			return err
		},
	})
	t.Logf("apply: %v", err)
	is.True(err != nil)                             // nothing written
	is.True(errors.Is(err, turnframe.ErrAppWrite))  // the app's writes failed
	is.True(!errors.Is(err, turnframe.ErrConflict)) // not the store's conflict
	_, err = s.LoadTurn(ctx, "acme", turn)
	is.True(errors.Is(err, turnframe.ErrNotFound)) // and the Write is not there
}
