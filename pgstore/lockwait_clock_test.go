package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore/pgtest"
)

// DESIGN.md §14, Clock: "A Write that is not a Begin reads the clock in the
// statement that locks its turn (statement_timestamp(), taken when that
// statement starts, before any lock wait, so the same holds)": a call that
// waits for a lock measures from its start, and its lease ends no later.
// A take that waited for its turn's lock while the database's clock moved
// on must lease the entry from before the wait.
func TestATakeThatWaitsForItsTurnLeasesFromBeforeTheWait(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	url := pgtest.Schema(t)
	s := mustOpenURL(t, url) // DatabaseClock, the default
	ids := turnframe.NewIDGenerator()
	now := time.Now()
	turn := ids.TurnID(now)
	_, err := s.Apply(ctx, turnframe.Write{
		Account: "acme", Turn: turn, Now: now,
		Begin: &turnframe.StoredTurn{Account: "acme", ID: turn, Conversation: ids.ConversationID(now), Text: "pay"},
		Admit: []turnframe.Command{{Key: "k", Case: "c", Name: "pay"}},
	})
	is.NoErr(err)

	blocker, tx := lockHolder(t, url)
	_, err = tx.Exec(ctx, `UPDATE turns SET updated_at = updated_at WHERE id = $1`, turn.String()) // as another Write of the turn would
	is.NoErr(err)

	const lease = time.Minute
	done := make(chan error, 1)
	go func() {
		_, err := s.Apply(ctx, turnframe.Write{
			Account: "acme", Turn: turn, Now: time.Now(),
			Settle: []turnframe.Settlement{{Key: "k", To: turnframe.JournalExecuting, Attempt: ids.AttemptID(now), Lease: lease}},
		})
		done <- err
	}()
	waitForLockWaiter(t, blocker) // the take's statement started, and waits for the turn
	var waiting time.Time
	is.NoErr(tx.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&waiting)) // after its start
	_, err = tx.Exec(ctx, `SELECT pg_sleep(0.5)`)                         // the database's clock moves on while it waits
	is.NoErr(err)
	is.NoErr(tx.Commit(ctx))
	is.NoErr(<-done)

	var until int64
	is.NoErr(s.Pool().QueryRow(ctx, `SELECT lease_until FROM journal WHERE account = 'acme' AND key = 'k'`).Scan(&until))
	latest := waiting.Add(lease).UnixMicro()
	is.True(until <= latest) // the lease runs from the take's start, not from when its lock came
}
