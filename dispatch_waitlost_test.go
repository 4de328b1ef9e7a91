package turnframe_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// flakyExtensions refuses every lease extension as busy until heal is
// called; after that it passes extensions to the store and hands the
// number of each one that went through to passed.
type flakyExtensions struct {
	turnframe.Store
	mu     sync.Mutex
	healed bool
	n      int
	passed chan int
}

func (f *flakyExtensions) heal() { f.mu.Lock(); f.healed = true; f.mu.Unlock() }

func (f *flakyExtensions) ExtendClaims(ctx context.Context, cs []turnframe.Claim, now time.Time, lease time.Duration) ([]error, error) {
	f.mu.Lock()
	healed := f.healed
	if healed {
		f.n++
	}
	n := f.n
	f.mu.Unlock()
	if !healed {
		return nil, turnframe.ErrBusy
	}
	select {
	case f.passed <- n:
	default:
	}
	return f.Store.ExtendClaims(ctx, cs, now, lease)
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
// NeedsIntervention: a person must decide, and nothing may send it. Were
// the sweep to send it when the place frees, on a claim that ended before
// its send started, the person who checks the remote would find nothing,
// resend, and the effect would happen twice. So also when the store
// answers the keeper again before the place frees: its extensions come back
// ErrClaimLost, and the lease end they carry must not revive the claim.
func TestARowWhoseClaimEndedWhileItWaitedIsNotSent(t *testing.T) {
	for _, heals := range []bool{false, true} {
		name := map[bool]string{false: "TheStoreStaysBusy", true: "TheStoreAnswersAgainBeforeThePlaceFrees"}[heals]
		t.Run(name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				ctx := context.Background()
				rows := dispEnqueue(t, store, rtAccount, "k1", dispMessages(2, "bakery", "")...)
				clock := newStepClock(dispNow)
				sender := &gatedSends{first: make(chan turnframe.OutboxID, 1), proceed: make(chan struct{})}
				cfg := turnframe.DispatchConfig{WorkerID: "w1", Concurrency: 2, SendTimeout: time.Hour, LeaseMargin: 10 * time.Millisecond,
					DestinationLimits: map[string]int{"bakery": 1}}
				flaky := &flakyExtensions{Store: store, passed: make(chan int, 8)}
				lostLogged := make(chan struct{}, 8) // the keeper logs a lost claim once it has taken the refusal in
				logger := slog.New(hookHandler{Handler: slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelDebug}), hook: func(msg string) {
					if strings.Contains(msg, "lost its claim") || strings.Contains(msg, "claim ended while its send was not running") {
						lostLogged <- struct{}{}
					}
				}})
				d := turnframe.NewDispatcher(flaky, sender, cfg, turnframe.WithClock(clock.read), turnframe.WithLogger(logger))
				done := runOnceAsync(t, d, ctx, dispNow)
				holder := await(t, sender.first, "the first send holds the place")
				waiter := otherRow(rows, holder)

				clock.set(dispNow.Add(2 * time.Hour)) // two hours on: every lease the claim granted has ended
				rec := turnframe.NewRecovery(store, turnframe.WithClock(clock.read), turnframe.WithDestination("bakery", turnframe.Remote{}))
				_, err := rec.Recover(ctx, turnframe.RecoveryScope{Account: "nobody"}, polNoTurns{t})
				is.NoErr(err)
				is.Equal(dispGet(t, store, waiter).Status, turnframe.OutboxNeedsIntervention) // a person decides now

				if heals {
					flaky.heal() // the store answers the keeper again: every extension is ErrClaimLost
					await(t, (<-chan int)(flaky.passed), "an extension reaches the store")
					for range 2 { // both rows' claims: taken in as lost
						await(t, (<-chan struct{})(lostLogged), "the keeper takes a lost claim in")
					}
				}
				close(sender.proceed) // the place frees
				await(t, done, "RunOnce returns")
				sender.mu.Lock()
				defer sender.mu.Unlock()
				is.Equal(sender.sent, []turnframe.OutboxID{holder}) // the row waiting when its claim ended was never sent
			})
		})
	}
}
