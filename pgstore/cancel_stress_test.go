package pgstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
)

// Calls whose contexts end at random moments — before, during and after
// their round trips — leave no connection of the pool in a state that makes
// a later call, under a live context, fail; and each cut call wrote all of
// its Write or nothing.
func TestCancelledCallsPoisonNoLaterCall(t *testing.T) {
	is := is.New(t)
	s := mustOpen(t, pgstore.WithClock(pgstore.CallerClock))
	bg := context.Background()
	ids := turnframe.NewIDGenerator()
	const n = 60
	bad := 0
	for i := range n {
		now := base.Add(time.Duration(i) * time.Second)
		key := turnframe.IdempotencyKey(fmt.Sprintf("k%d", i))
		ctx, cancel := context.WithTimeout(bg, time.Duration(rand.IntN(4000))*time.Microsecond)
		err := enqueueRows(ctx, s, ids, "acme", key, now, turnframe.OutboxMessage{Destination: "d", OrderKey: "o"})
		cancel()
		e, berr := s.ByKey(bg, "acme", key)
		if berr != nil && err == nil {
			t.Errorf("%d: enqueue landed but ByKey fails: %v", i, berr)
		}
		if berr == nil && e.Status == turnframe.JournalCommitted {
			var rows int
			is.NoErr(s.Pool().QueryRow(bg, `SELECT count(*) FROM outbox WHERE key = $1`, string(key)).Scan(&rows))
			is.Equal(rows, 1) // a committed command has its row: all or nothing
		}
		// A call under a live context right after.
		if _, err := s.ClaimDue(bg, now, 1, "w", time.Minute); err != nil {
			bad++
			t.Errorf("%d: a live call after a cancelled one failed: %v", i, err)
		}
		if _, err := s.ListOutbox(bg, turnframe.OutboxFilter{Limit: 1}); err != nil {
			bad++
			t.Errorf("%d: a live read after a cancelled call failed: %v", i, err)
		}
	}
	t.Logf("%d of %d live calls failed", bad, 2*n)
}
