package turnframe_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// busyExtensions refuses every lease extension as busy: another writer holds
// the store whenever the keeper tries.
type busyExtensions struct{ turnframe.Store }

func (busyExtensions) ExtendClaims(context.Context, []turnframe.Claim, time.Time, time.Duration) ([]error, error) {
	return nil, turnframe.ErrBusy
}

// gatedSends blocks the first send until proceed is closed and records
// every send's row.
type gatedSends struct {
	mu      sync.Mutex
	sent    []turnframe.OutboxID
	first   chan turnframe.OutboxID
	proceed chan struct{}
}

func (g *gatedSends) Send(_ context.Context, e turnframe.OutboxEntry) turnframe.Dispatched {
	g.mu.Lock()
	g.sent = append(g.sent, e.ID)
	n := len(g.sent)
	g.mu.Unlock()
	if n == 1 {
		g.first <- e.ID
		<-g.proceed
	}
	return turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200"}
}

// TestARowWhoseClaimEndedWhileItWaitedIsNotSent: a row waiting for its
// destination's place (DestinationLimits) while the keeper cannot extend
// its lease (every extension busy). Its lease ends; recovery expires it —
// the send "may have started" — and its Remote (neither) escalates it to
// NeedsIntervention: a person must decide, and nothing may send it. When
// the place frees, the sweep sends it anyway, on a claim that ended before
// its send started: the person who checks the remote finds nothing, resends,
// and the effect happens twice. A claim is what makes a send exclusive
// (DESIGN §1, §5: a settlement or an extension needs the claim); a send
// should need it too, at least once its lease has run out.
func TestARowWhoseClaimEndedWhileItWaitedIsNotSent(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		rows := dispEnqueue(t, store, rtAccount, "k1", dispMessages(2, "bakery", "")...)
		clock := newStepClock(dispNow)
		sender := &gatedSends{first: make(chan turnframe.OutboxID, 1), proceed: make(chan struct{})}
		cfg := turnframe.DispatchConfig{WorkerID: "w1", Concurrency: 2, SendTimeout: time.Hour, LeaseMargin: 10 * time.Millisecond,
			DestinationLimits: map[string]int{"bakery": 1}}
		d := turnframe.NewDispatcher(busyExtensions{store}, sender, cfg, turnframe.WithClock(clock.read))
		done := make(chan turnframe.DispatchReport, 1)
		go func() {
			report, err := d.RunOnce(ctx, dispNow)
			if err != nil {
				t.Errorf("run once: %v", err)
			}
			done <- report
		}()
		holder := await(t, sender.first, "the first send holds the place")
		waiter := rows[0].ID
		if holder == waiter {
			waiter = rows[1].ID
		}

		clock.set(dispNow.Add(2 * time.Hour)) // two hours on: every lease the claim granted has ended
		rec := turnframe.NewRecovery(store, turnframe.WithClock(clock.read), turnframe.WithDestination("bakery", turnframe.Remote{}))
		_, err := rec.Recover(ctx, turnframe.RecoveryScope{Account: "nobody"}, polNoTurns{t})
		is.NoErr(err)
		is.Equal(dispGet(t, store, waiter).Status, turnframe.OutboxNeedsIntervention) // a person decides now

		close(sender.proceed) // the place frees
		await(t, done, "RunOnce returns")
		sender.mu.Lock()
		defer sender.mu.Unlock()
		is.Equal(sender.sent, []turnframe.OutboxID{holder}) // the row waiting when its claim ended was never sent
	})
}
