package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
	"github.com/turnframe/turnframe/pgstore/pgtest"
)

// applyAll applies writes at once, each on a store of its own (as separate
// processes would), and returns what each got.
func applyAll(stores []*pgstore.Store, writes []turnframe.Write) ([]turnframe.Applied, []error) {
	applied, errs := make([]turnframe.Applied, len(writes)), make([]error, len(writes))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, w := range writes {
		wg.Go(func() {
			<-start
			applied[i], errs[i] = stores[i%len(stores)].Apply(context.Background(), w)
		})
	}
	close(start)
	wg.Wait()
	return applied, errs
}

// openMany opens n stores on one fresh schema.
func openMany(t *testing.T, n int) []*pgstore.Store {
	t.Helper()
	url := pgtest.Schema(t)
	stores := make([]*pgstore.Store, n)
	for i := range stores {
		stores[i] = mustOpenURL(t, url)
	}
	return stores
}

// Writers on several stores at once are arbitrated as one writer would:
// a key admitted by several turns at once is admitted once and reported to
// the others as theirs, events appended to one case at once get
// consecutive revisions, and no writer sees a refusal one writer would not
// make.
func TestConcurrentWriters(t *testing.T) {
	const n, rounds = 6, 5
	t.Run("AKeyAdmittedByManyTurnsAtOnceIsAdmittedOnce", func(t *testing.T) {
		is := is.New(t)
		stores := openMany(t, 3)
		ids := turnframe.NewIDGenerator()
		for round := range rounds {
			key := turnframe.IdempotencyKey(fmt.Sprintf("k-%d", round))
			writes := make([]turnframe.Write, n)
			for i := range writes {
				turn := ids.TurnID(base)
				writes[i] = turnframe.Write{Account: "acme", Turn: turn, Now: base,
					Begin: &turnframe.StoredTurn{Account: "acme", ID: turn, Conversation: ids.ConversationID(base), Text: "book"},
					Admit: []turnframe.Command{{Key: key, Case: "booking/1", Name: "book"}}}
			}
			applied, errs := applyAll(stores, writes)
			first := -1
			for i, err := range errs {
				is.NoErr(err) // every writer lands
				if applied[i].Earlier[0].Key == "" {
					is.Equal(first, -1) // one writer admits the key
					first = i
				}
			}
			is.True(first >= 0) // one did
			for i := range applied {
				is.Equal(applied[i].Admitted[0].Turn, writes[first].Turn) // the entry is the first turn's, for everyone
			}
		}
	})
	t.Run("EventsAppendedToOneCaseAtOnceGetConsecutiveRevisions", func(t *testing.T) {
		is := is.New(t)
		stores := openMany(t, 3)
		ids := turnframe.NewIDGenerator()
		ctx := context.Background()
		var writes []turnframe.Write
		for i := range n * rounds {
			key := turnframe.IdempotencyKey(fmt.Sprintf("k-%d", i))
			turn, attempt := ids.TurnID(base), ids.AttemptID(base)
			_, err := stores[0].Apply(ctx, turnframe.Write{Account: "acme", Turn: turn, Now: base,
				Begin: &turnframe.StoredTurn{Account: "acme", ID: turn, Conversation: ids.ConversationID(base), Text: "book"},
				Admit: []turnframe.Command{{Key: key, Case: "booking/1", Name: "book"}},
				Settle: []turnframe.Settlement{{Key: key, To: turnframe.JournalExecuting, Attempt: attempt,
					Lease: time.Minute}}})
			is.NoErr(err) // running
			writes = append(writes, turnframe.Write{Account: "acme", Turn: turn, Now: base.Add(time.Second),
				Settle: []turnframe.Settlement{{Key: key, To: turnframe.JournalCommitted, Attempt: attempt}},
				Events: []turnframe.Event{{Case: "booking/1", Type: "booked"}, {Case: "booking/1", Type: "paid"}}})
		}
		_, errs := applyAll(stores, writes)
		for _, err := range errs {
			is.NoErr(err) // every commit lands
		}
		evs, err := stores[0].EventsSince(ctx, "acme", "booking/1", 0, turnframe.MaxLimit)
		is.NoErr(err)                     // events
		is.Equal(len(evs), 2*len(writes)) // all of them
		for i, ev := range evs {
			is.Equal(ev.Revision, turnframe.CaseRevision(i+1)) // consecutive revisions
			if i%2 == 1 {
				is.Equal(evs[i-1].Turn, ev.Turn) // a Write's events stay together
			}
		}
	})
	t.Run("AnExpectationMetByOneOfManyWritersAtOnceLetsOnlyThatOneLand", func(t *testing.T) {
		is := is.New(t)
		stores := openMany(t, 3)
		ids := turnframe.NewIDGenerator()
		ctx := context.Background()
		var writes []turnframe.Write
		for i := range n {
			key := turnframe.IdempotencyKey(fmt.Sprintf("k-%d", i))
			turn, attempt := ids.TurnID(base), ids.AttemptID(base)
			_, err := stores[0].Apply(ctx, turnframe.Write{Account: "acme", Turn: turn, Now: base,
				Begin: &turnframe.StoredTurn{Account: "acme", ID: turn, Conversation: ids.ConversationID(base), Text: "book"},
				Admit: []turnframe.Command{{Key: key, Case: "seat/4A", Name: "book"}},
				Settle: []turnframe.Settlement{{Key: key, To: turnframe.JournalExecuting, Attempt: attempt,
					Lease: time.Minute}}})
			is.NoErr(err) // running
			writes = append(writes, turnframe.Write{Account: "acme", Turn: turn, Now: base.Add(time.Second),
				Settle: []turnframe.Settlement{{Key: key, To: turnframe.JournalCommitted, Attempt: attempt}},
				Events: []turnframe.Event{{Case: "seat/4A", Type: "booked"}},
				Expect: map[turnframe.CaseKey]turnframe.CaseRevision{"seat/4A": 0}})
		}
		_, errs := applyAll(stores, writes)
		landed := 0
		for _, err := range errs {
			switch {
			case err == nil:
				landed++
			case !errors.Is(err, turnframe.ErrConflict):
				t.Fatalf("got %v, want nil or ErrConflict", err)
			}
		}
		is.Equal(landed, 1) // one booking of the seat
		rev, err := stores[0].CaseRevision(ctx, "acme", "seat/4A")
		is.NoErr(err)                            // revision
		is.Equal(rev, turnframe.CaseRevision(1)) // one event
	})
}
