package turnframe_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// arrBound is the command timeout and the send timeout of these tests: the
// longest a request, once started, may take to reach the remote.
const arrBound = 20 * time.Second

// arrWindow is how long arrRemote remembers a key, and what it is declared
// to remember it for.
const arrWindow = time.Hour

// arrRemote deduplicates as a real remote does: it remembers a key for
// exactly arrWindow from the request that first carried it, on the test's
// clock, and does the effect of every request whose key it does not
// remember.
type arrRemote struct {
	clock *polClock
	mu    sync.Mutex
	first map[string]time.Time
	done  map[string]int
}

func newArrRemote(clock *polClock) *arrRemote {
	return &arrRemote{clock: clock, first: make(map[string]time.Time), done: make(map[string]int)}
}

// receive is one request under key reaching the remote now.
func (r *arrRemote) receive(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	if first, ok := r.first[key]; ok && now.Before(first.Add(arrWindow)) {
		return // remembered: answered as the first was, not done again
	}
	r.first[key] = now
	r.done[key]++
}

// applied returns how often the remote did key's effect.
func (r *arrRemote) applied(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.done[key]
}

// arrTimings are the cases of every path: a resend started with what is
// left of the window when it starts. Only one that reaches the remote
// before the window closes, however long its send takes within its bound,
// may be sent.
var arrTimings = []struct {
	name     string
	left     time.Duration // of the window, when the resend is taken up
	withheld bool
}{
	{"it reaches the remote before the window closes", arrBound + time.Second, false},
	{"it may reach the remote the instant the window closes", arrBound, true},
	{"it starts a millisecond before the window closes", time.Millisecond, true},
}

// A resend the policy allowed while the remote remembered the key is taken
// up by Execute inside the window, but its handler may take the command
// timeout to reach the remote: one started less than that before the
// window closes may arrive after the remote forgot the key, and be done a
// second time. It is withheld (CodeKeyForgotten) and escalated.
func TestACommandResendThatWouldReachTheRemoteAfterItsWindowIsWithheld(t *testing.T) {
	for _, tt := range arrTimings {
		t.Run(tt.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				ctx := context.Background()
				clock, remote, opts := arrCharge()
				rt := turnframe.New(store, opts...)
				rec := turnframe.NewRecovery(store, opts...)
				h := rtNewHandler(func(_ context.Context, call turnframe.Call, n int) turnframe.Outcome {
					if n == 1 {
						remote.receive(string(call.Command.Key)) // the charge lands, its answer is lost
						return turnframe.Unknown("")
					}
					clock.Add(arrBound) // the resend takes all its time to arrive
					remote.receive(string(call.Command.Key))
					return turnframe.Commit([]turnframe.Event{{Case: call.Command.Case, Type: "charged"}})
				})
				turn := rtPlanned(t, rt, rtAccount, rtCmd("k-charge", "card/1", "charge"))
				_, err := rt.Execute(ctx, rtAccount, turn, h)
				is.NoErr(err)
				clock.Add(time.Minute)
				report, err := rec.Recover(ctx, turnframe.RecoveryScope{}, polNoResume{})
				is.NoErr(err)
				is.Equal(report.Policy[0].Outcome, turnframe.PolicyResent) // the remote still remembers the key
				clock.Add(arrWindow - time.Minute - tt.left)

				_, err = rt.Execute(ctx, rtAccount, turn, h)
				is.NoErr(err)
				is.Equal(remote.applied("k-charge"), 1) // never done twice
				if !tt.withheld {
					is.Equal(h.callsOf("k-charge"), 2) // resent: it arrives while the remote remembers the key
					is.Equal(rtEntry(t, store, "k-charge").Status, turnframe.JournalCommitted)
					return
				}
				is.Equal(h.callsOf("k-charge"), 1) // withheld: the handler not called
				e := rtEntry(t, store, "k-charge")
				is.Equal(e.Status, turnframe.JournalOutcomeUnknown) // still unknown, for the policy
				is.Equal(e.Code, turnframe.CodeKeyForgotten)

				report, err = rec.Recover(ctx, turnframe.RecoveryScope{}, polNoResume{})
				is.NoErr(err)
				is.Equal(report.Policy[0].Outcome, turnframe.PolicyEscalated) // not resent again, though the window still runs
				e = rtEntry(t, store, "k-charge")
				is.Equal(e.Status, turnframe.JournalNeedsIntervention)
				is.Equal(e.Code, turnframe.CodeKeyForgotten)
			})
		})
	}
}

// Execute takes over an attempt that died after its request reached the
// remote. Taken over inside the window, the handler it runs again may take
// the command timeout to reach the remote: started less than that before
// the window closes, it may arrive after the remote forgot the key. Such a
// dead attempt is declared unknown instead, and the policy's resend of it
// is withheld and escalated: the remote never does it twice.
func TestATakeOverThatWouldReachTheRemoteAfterItsWindowIsDeclaredUnknown(t *testing.T) {
	for _, tt := range arrTimings {
		t.Run(tt.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				ctx := context.Background()
				clock, remote, opts := arrCharge()
				rt := turnframe.New(store, opts...)
				turn := rtPlanned(t, rt, rtAccount, rtCmd("k-charge", "card/1", "charge"))
				// An attempt takes the entry, its request reaches the
				// remote, and it dies before it settles.
				dead := turnframe.NewIDGenerator().AttemptID(dispNow)
				_, err := store.Apply(ctx, turnframe.Write{Account: rtAccount, Turn: turn, Now: clock.Now(),
					Settle: []turnframe.Settlement{{Key: "k-charge", To: turnframe.JournalExecuting, Attempt: dead, Lease: time.Minute}}})
				is.NoErr(err)
				remote.receive("k-charge")
				clock.Add(arrWindow - tt.left) // its lease ended long ago

				h := rtNewHandler(func(_ context.Context, call turnframe.Call, _ int) turnframe.Outcome {
					clock.Add(arrBound) // the rerun takes all its time to arrive
					remote.receive(string(call.Command.Key))
					return turnframe.Commit([]turnframe.Event{{Case: call.Command.Case, Type: "charged"}})
				})
				_, err = rt.Execute(ctx, rtAccount, turn, h)
				is.NoErr(err)
				is.Equal(remote.applied("k-charge"), 1) // never done twice
				if !tt.withheld {
					is.Equal(h.callsOf("k-charge"), 1) // taken over: it arrives while the remote remembers the key
					is.Equal(rtEntry(t, store, "k-charge").Status, turnframe.JournalCommitted)
					return
				}
				is.Equal(h.callsOf("k-charge"), 0) // not run again
				e := rtEntry(t, store, "k-charge")
				is.Equal(e.Status, turnframe.JournalOutcomeUnknown) // declared unknown, for the policy
				is.Equal(e.Code, turnframe.CodeLeaseEnded)

				// The policy, judging at the start of the window, resends
				// it; Execute withholds the resend; the policy escalates.
				rec := turnframe.NewRecovery(store, opts...)
				_, err = rec.Recover(ctx, turnframe.RecoveryScope{}, polNoResume{})
				is.NoErr(err)
				_, err = rt.Execute(ctx, rtAccount, turn, h)
				is.NoErr(err)
				_, err = rec.Recover(ctx, turnframe.RecoveryScope{}, polNoResume{})
				is.NoErr(err)
				is.Equal(h.callsOf("k-charge"), 0)      // never run again
				is.Equal(remote.applied("k-charge"), 1) // never done twice
				e = rtEntry(t, store, "k-charge")
				is.Equal(e.Status, turnframe.JournalNeedsIntervention) // a person decides
				is.Equal(e.Code, turnframe.CodeKeyForgotten)
			})
		})
	}
}

// arrSender sends a row to remote, taking all of its send timeout to
// arrive, and counts its sends.
type arrSender struct {
	remote *arrRemote
	mu     sync.Mutex
	sends  int
}

func (s *arrSender) Send(_ context.Context, e turnframe.OutboxEntry) turnframe.Dispatched {
	s.mu.Lock()
	s.sends++
	s.mu.Unlock()
	s.remote.clock.Add(arrBound)
	s.remote.receive(string(e.Key))
	return turnframe.Dispatched{Kind: turnframe.DispatchCompleted}
}

func (s *arrSender) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sends
}

// A Dispatcher claims the policy's resend of a row inside the window, but
// its send may take SendTimeout to reach the remote: started less than
// that before the window closes, it may arrive after the remote forgot the
// key, and be done a second time. It is withheld (CodeKeyForgotten) and
// escalated.
func TestAnOutboxResendThatWouldReachTheRemoteAfterItsWindowIsWithheld(t *testing.T) {
	for _, tt := range arrTimings {
		t.Run(tt.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				ctx := context.Background()
				declared := turnframe.Remote{Deduplicates: arrWindow}
				row := polUnknownRow(t, store, "k1", "payments")
				clock := newPolClock(dispNow)
				remote := newArrRemote(clock)
				remote.receive(string(row.Key)) // the first send landed, its answer was lost
				clock.Add(time.Minute)
				polResend(t, ctx, store, clock, declared)
				clock.Add(arrWindow - time.Minute - tt.left)

				sender := &arrSender{remote: remote}
				opts := []turnframe.Option{turnframe.WithClock(clock.Now), turnframe.WithDestination("payments", declared)}
				report, err := turnframe.NewDispatcher(store, sender, turnframe.DispatchConfig{WorkerID: "w2", SendTimeout: arrBound},
					opts...).RunOnce(ctx, clock.Now())
				is.NoErr(err)
				is.Equal(remote.applied(string(row.Key)), 1) // never done twice
				if !tt.withheld {
					is.Equal(sender.count(), 1) // resent: it arrives while the remote remembers the key
					is.Equal(report.Completed, []turnframe.OutboxID{row.ID})
					return
				}
				is.Equal(sender.count(), 0) // withheld: the sender not called
				is.Equal(report.Unknown, []turnframe.OutboxID{row.ID})
				is.Equal(dispGet(t, store, row.ID).LastCode, turnframe.CodeKeyForgotten)

				rec := turnframe.NewRecovery(store, opts...)
				recovered, err := rec.Recover(ctx, turnframe.RecoveryScope{}, polNoTurns{t})
				is.NoErr(err)
				is.Equal(recovered.Policy[0].Outcome, turnframe.PolicyEscalated) // not resent again, though the window still runs
				got := dispGet(t, store, row.ID)
				is.Equal(got.Status, turnframe.OutboxNeedsIntervention)
				is.Equal(got.LastCode, turnframe.CodeKeyForgotten)
			})
		})
	}
}

// arrCharge returns a clock at dispNow, a remote remembering keys on it for
// arrWindow, and the options of a Runtime or Recovery on that clock whose
// command "charge" is declared such a remote, called for up to arrBound.
func arrCharge() (*polClock, *arrRemote, []turnframe.Option) {
	clock := newPolClock(dispNow)
	return clock, newArrRemote(clock), []turnframe.Option{turnframe.WithClock(clock.Now), turnframe.WithCommandTimeout(arrBound),
		turnframe.WithCommand("charge", turnframe.Remote{Deduplicates: arrWindow})}
}

// arrWithheld checks that k-charge's effect was done once, its handler
// called calls times, and its entry left unknown, CodeKeyForgotten, for the
// policy, which escalates it (arrEscalated).
func arrWithheld(t *testing.T, store turnframe.Store, rec *turnframe.Recovery, remote *arrRemote, h *rtHandler, calls int) {
	t.Helper()
	is := is.New(t)
	is.Equal(remote.applied("k-charge"), 1) // never done twice
	is.Equal(h.callsOf("k-charge"), calls)  // the handler not called for the withheld request
	e := rtEntry(t, store, "k-charge")
	is.Equal(e.Status, turnframe.JournalOutcomeUnknown) // still unknown, for the policy
	is.Equal(e.Code, turnframe.CodeKeyForgotten)
	arrEscalated(t, store, rec)
}
