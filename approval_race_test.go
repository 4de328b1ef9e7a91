package turnframe_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// Two people deciding one payment at the worst moment: of many Approve and
// Deny calls racing on one awaiting entry, exactly one lands, every other
// is ErrConflict, the entry ends as that one decision says, and the trail
// holds one decision.
func TestOneApprovalDecisionLandsOfManyAtOnce(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		rt := turnframe.New(store)
		rtPlanned(t, rt, rtAccount, apPay("k-pay"))

		const callers = 8
		start := make(chan struct{})
		type decision struct {
			approve bool
			err     error
		}
		results := make(chan decision, callers)
		var wg sync.WaitGroup
		for i := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				var err error
				if i%2 == 0 {
					_, err = rt.Approve(ctx, rtAccount, "k-pay", "operator:alice", "")
				} else {
					_, err = rt.Deny(ctx, rtAccount, "k-pay", "operator:bob", "")
				}
				results <- decision{approve: i%2 == 0, err: err}
			}()
		}
		close(start)
		wg.Wait()
		close(results)

		var landed []decision
		for d := range results {
			if d.err == nil {
				landed = append(landed, d)
				continue
			}
			is.True(errors.Is(d.err, turnframe.ErrConflict)) // a decision already made is a conflict, nothing else
		}
		is.Equal(len(landed), 1) // exactly one decision landed
		want := turnframe.JournalRejected
		if landed[0].approve {
			want = turnframe.JournalPending
		}
		is.Equal(rtEntry(t, store, "k-pay").Status, want) // and the entry says that one
		decisions := 0
		for _, h := range histOf(t, store, turnframe.JournalSubject(rtAccount, "k-pay")) {
			if h.From == turnframe.JournalAwaitingApproval.String() {
				decisions++
			}
		}
		is.Equal(decisions, 1) // one decision in the trail
	})
}
