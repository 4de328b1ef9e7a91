package sqlitestore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

// An App's deferred foreign key (DEFERRABLE INITIALLY DEFERRED, checked at
// the COMMIT, after the App returned nil) that fails is the app's write
// failing: ErrAppWrite, nothing written, never the store's ErrConflict and
// never a raw driver error.
func TestAnAppsDeferredViolationIsErrAppWrite(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s, err := sqlitestore.Open(ctx, t.TempDir()+"/app.db")
	is.NoErr(err)
	t.Cleanup(func() { s.Close() })
	tx, err := s.BeginTx(ctx)
	is.NoErr(err)
	_, err = tx.ExecContext(ctx, `CREATE TABLE seats (id TEXT PRIMARY KEY) STRICT`)
	is.NoErr(err)
	_, err = tx.ExecContext(ctx, `CREATE TABLE bookings (seat TEXT REFERENCES seats (id) DEFERRABLE INITIALLY DEFERRED) STRICT`)
	is.NoErr(err)
	is.NoErr(tx.Commit())

	ids := turnframe.NewIDGenerator()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	turn := ids.TurnID(now)
	_, err = s.Apply(ctx, turnframe.Write{Account: "acme", Turn: turn, Now: now,
		Begin: &turnframe.StoredTurn{Account: "acme", ID: turn, Conversation: ids.ConversationID(now), Text: "book"},
		App: func(ctx context.Context, tx turnframe.Tx) error {
			sqlTx, _ := sqlitestore.SQLTx(tx)
			_, err := sqlTx.ExecContext(ctx, `INSERT INTO bookings (seat) VALUES ('9Z')`) // no such seat: checked at the commit
			return err
		},
	})
	t.Logf("apply: %v", err)
	is.True(err != nil)                             // nothing written
	is.True(errors.Is(err, turnframe.ErrAppWrite))  // the app's write failed
	is.True(!errors.Is(err, turnframe.ErrConflict)) // not the store's conflict
	_, err = s.LoadTurn(ctx, "acme", turn)
	is.True(errors.Is(err, turnframe.ErrNotFound)) // and the Write is not there
}
