package turnframe_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// backStepClock reads live, except that the first reading after arm is
// ended: a wall clock stepped back by the difference between the two
// readings that follow each other.
type backStepClock struct {
	mu          sync.Mutex
	live, ended time.Time
	armed       bool
}

func (c *backStepClock) read() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.armed {
		c.armed = false
		return c.ended
	}
	return c.live
}

func (c *backStepClock) arm() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armed = true
}

// rtStaleListing is a store on a clock of its own (as rtStoreClock) whose
// listing of a turn's entries shows key as it was before another attempt
// took it: Pending, under no attempt. Each read of one entry arms clock.
type rtStaleListing struct {
	rtStoreClock
	key   turnframe.IdempotencyKey
	clock *backStepClock
}

func (s *rtStaleListing) ForTurn(ctx context.Context, account turnframe.AccountID, turn turnframe.TurnID) ([]turnframe.JournalEntry, error) {
	entries, err := s.Store.ForTurn(ctx, account, turn)
	for i, e := range entries {
		if e.Key == s.key {
			e.Status, e.Attempt, e.Attempts, e.LeaseUntil = turnframe.JournalPending, turnframe.AttemptID{}, 0, time.Time{}
			entries[i] = e
		}
	}
	return entries, err
}

func (s *rtStaleListing) ByKey(ctx context.Context, account turnframe.AccountID, key turnframe.IdempotencyKey) (turnframe.JournalEntry, error) {
	s.clock.arm()
	return s.Store.ByKey(ctx, account, key)
}

// A take refused because another attempt took the entry since it was
// listed reads the entry again and judges it: in flight while its lease
// runs, declared unknown once it ended if its Remote forbids a blind rerun,
// taken over otherwise. It judged the lease at one reading of the clock
// and the Remote's rule at another: a wall clock stepped back between the
// two found the lease ended at the first and running at the second, and
// neither case held — so the entry, of a remote that can do neither, was
// taken over, on a store that judged the lease ended on its own clock, and
// its command run beside the live holder. One reading judges both now.
func TestATakeRefusedJudgesTheEntryReadAgainAtOneReadingOfTheClock(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		t0 := time.Now().UTC().Truncate(time.Microsecond)
		opts := func(read func() time.Time) []turnframe.Option {
			return []turnframe.Option{turnframe.WithClock(read), turnframe.WithCommandTimeout(time.Minute),
				turnframe.WithLeaseMargin(time.Second), turnframe.WithCommand("book", turnframe.Remote{})} // can do neither
		}
		holder := turnframe.New(store, opts(newStepClock(t0).read)...)
		turn := rtPlanned(t, holder, rtAccount, rtCmd("k-book", "flight/7", "book"))
		finish := rtHeld(t, holder, turn, "k-book", turnframe.Commit(nil))
		held := rtEntry(t, store, "k-book")
		end := held.LeaseUntil

		clock := &backStepClock{live: end.Add(-time.Microsecond), ended: end.Add(time.Microsecond)}
		stale := &rtStaleListing{rtStoreClock: rtStoreClock{Store: store, now: func() time.Time { return end.Add(time.Microsecond) }}, // the store: it ended
			key: "k-book", clock: clock}
		ran := 0
		_, err := turnframe.New(stale, opts(clock.read)...).Execute(context.Background(), rtAccount, turn,
			turnframe.HandlerFunc(func(ctx context.Context, call turnframe.Call) turnframe.Outcome {
				ran++
				return rtScript(ctx, call, 1)
			}))
		is.NoErr(err)
		is.Equal(ran, 0)                                            // never run beside the holder
		is.Equal(rtEntry(t, store, "k-book").Attempt, held.Attempt) // never taken over
		_, _ = finish()
		is.Equal(rtEntry(t, store, "k-book").Attempts, 1) // one attempt, ever
	})
}
