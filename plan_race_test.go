package turnframe_test

import (
	"context"
	"sync"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// A message delivered twice at once becomes two turns planning one key
// together: exactly one Plan admits it now, every other says another turn
// admitted it, and they all name the same entry.
func TestOfPlansRacingOnOneKeyExactlyOneAdmitsIt(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		rt := turnframe.New(store)
		const callers = 6
		turns := make([]turnframe.TurnID, callers)
		for i := range turns {
			turn, err := rt.Receive(ctx, rtAccount, rt.NewConversationID(), "book seat 1")
			is.NoErr(err) // receive
			turns[i] = turn
		}
		start := make(chan struct{})
		reports := make([]turnframe.PlanReport, callers)
		errs := make([]error, callers)
		var wg sync.WaitGroup
		for i, turn := range turns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				reports[i], errs[i] = rt.Plan(ctx, rtAccount, turn, turnframe.Plan{Commands: []turnframe.Command{rtCmd("k-seat", "seat/1", "book")}})
			}()
		}
		close(start)
		wg.Wait()
		now, earlier := 0, 0
		var owner turnframe.TurnID
		for i, r := range reports {
			is.NoErr(errs[i]) // every Plan lands
			a := r.Admissions[0]
			switch a.Kind {
			case turnframe.AdmittedNow:
				now++
				owner = turns[i]
			case turnframe.AdmittedByAnotherTurn:
				earlier++
				is.True(a.Repeated()) // the app can say "already done"
			default:
				t.Fatalf("plan %d: admission %v", i, a.Kind)
			}
		}
		is.Equal(now, 1)             // exactly one admitted it
		is.Equal(earlier, callers-1) // every other was told
		for _, r := range reports {
			is.Equal(r.Admissions[0].Entry.Turn, owner) // and all name the one entry
		}
	})
}
