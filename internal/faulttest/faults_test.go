package faulttest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/internal/sqlitefile"
	"github.com/turnframe/turnframe/memstore"
	"github.com/turnframe/turnframe/sqlitestore"
)

// Command kinds, carried as the command name.
const (
	kEnqueue1 = "enqueue1" // commit one event and one row
	kEnqueue2 = "enqueue2" // commit one event and two rows
	kReject   = "reject"
	kUnknown  = "unknown" // applies its effect, then says the outcome is unknown
)

var faultAccount = turnframe.AccountID("acct")

// planFor derives a turn's plan from its text, so recovery can plan a turn
// received by a call that failed after writing.
func planFor(text string) turnframe.Plan {
	kinds := []string{kEnqueue1, kEnqueue2, kReject}
	if strings.HasPrefix(text, "U") {
		kinds = []string{kUnknown, kEnqueue1}
	}
	var p turnframe.Plan
	for i, k := range kinds {
		p.Commands = append(p.Commands, turnframe.Command{
			Key: turnframe.IdempotencyKey(fmt.Sprintf("%s-%d", text, i)), Case: turnframe.CaseKey("case-" + text), Name: k,
		})
	}
	return p
}

// domain is the application's side: it counts handler calls and applies
// effects once per key, as a remote with idempotency keys would.
type domain struct {
	mu      sync.Mutex
	calls   map[turnframe.IdempotencyKey]int
	applied map[turnframe.IdempotencyKey]int
}

func newDomain() *domain {
	return &domain{calls: map[turnframe.IdempotencyKey]int{}, applied: map[turnframe.IdempotencyKey]int{}}
}

func (d *domain) apply(key turnframe.IdempotencyKey) {
	if d.applied[key] == 0 {
		d.applied[key] = 1
	}
}

func (d *domain) Handle(ctx context.Context, c turnframe.Call) turnframe.Outcome {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls[c.Command.Key]++
	ev := []turnframe.Event{{Case: c.Command.Case, Type: c.Command.Name}}
	msg := turnframe.OutboxMessage{Destination: "remote", Payload: []byte(c.Command.Key)}
	switch c.Command.Name {
	case kEnqueue1:
		d.apply(c.Command.Key)
		return turnframe.Commit(ev, msg)
	case kEnqueue2:
		d.apply(c.Command.Key)
		return turnframe.Commit(ev, msg, msg)
	case kUnknown:
		d.apply(c.Command.Key)
		return turnframe.Unknown("ref")
	}
	return turnframe.Reject("no")
}

// Verify answers, as the remote would, whether the effect of u is there:
// the Verifier of the Remote the app declares for kUnknown commands.
func (d *domain) Verify(ctx context.Context, u turnframe.Uncertain) turnframe.Verification {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.applied[u.Key] > 0 {
		return turnframe.Verification{Found: turnframe.FoundHappened, Code: "found"}
	}
	return turnframe.Verification{Found: turnframe.FoundNotHappened, Code: "absent"}
}

// app is an application over a (faulty) store: it runs turns and acts on
// recovery's decisions.
type app struct {
	store turnframe.Store
	resumer
	dom *domain
}

// resumer runs a turn's commands with h and delivers it, and is the
// recovery handler of the apps here: it plans an interrupted turn again
// from its text (plan), resumes its commands, or delivers it again.
type resumer struct {
	rt   *turnframe.Runtime
	rec  *turnframe.Recovery
	h    turnframe.Handler
	plan func(text string) turnframe.Plan
}

// newApp runs its turns and its recovery with a clock fixed at now: a
// restart after a crash is an app whose clock is past the leases the
// crashed one took (the runtime resumes a command only once its attempt's
// lease ended, and recovery expires only claims whose lease ended). It
// declares the remote of kUnknown commands verifiable by the domain, so
// recovery's policy settles their unknown outcomes; outbox destinations
// are left undeclared (a claim whose lease ended is sent again, under the
// same key).
func newApp(store turnframe.Store, dom *domain, now time.Time) *app {
	opts := []turnframe.Option{
		turnframe.WithClock(func() time.Time { return now }),
		turnframe.WithCommand(kUnknown, turnframe.Remote{Verifier: dom}),
	}
	return &app{store: store, dom: dom, resumer: resumer{
		rt: turnframe.New(store, opts...), rec: turnframe.NewRecovery(store, opts...), h: dom, plan: planFor}}
}

// afterLeases is how long after a crash its recovery runs: past every lease
// a runtime (command timeout + lease margin) or a dispatcher (send timeout +
// lease margin) takes under the default options.
const afterLeases = time.Hour

func (a *app) turn(ctx context.Context, text string) error {
	turn, err := a.rt.Receive(ctx, faultAccount, a.rt.NewConversationID(), text)
	if err != nil {
		return err
	}
	if _, err := a.rt.Plan(ctx, faultAccount, turn, planFor(text)); err != nil {
		return err
	}
	return a.finish(ctx, faultAccount, turn)
}

func (r resumer) finish(ctx context.Context, account turnframe.AccountID, turn turnframe.TurnID) error {
	rep, err := r.rt.Execute(ctx, account, turn, r.h)
	if err != nil {
		return err
	}
	if rep.Phase.IsTerminal() {
		return nil
	}
	return r.rt.Deliver(ctx, account, turn, "done")
}

func (r resumer) RestartInterpretation(ctx context.Context, m turnframe.TurnPhaseMarker, _ turnframe.RecoveryAction) error {
	st, err := r.rec.StoredTurn(ctx, m.Account, m.Turn)
	if err != nil {
		return err
	}
	if _, err := r.rt.Plan(ctx, m.Account, m.Turn, r.plan(st.Text)); err != nil {
		return err
	}
	return r.finish(ctx, m.Account, m.Turn)
}

func (r resumer) ResumeCommands(ctx context.Context, m turnframe.TurnPhaseMarker, _ turnframe.RecoveryAction) error {
	return r.finish(ctx, m.Account, m.Turn)
}

func (r resumer) RegenerateResponse(ctx context.Context, m turnframe.TurnPhaseMarker, _ turnframe.RecoveryAction) error {
	return r.rt.Deliver(ctx, m.Account, m.Turn, "regenerated")
}

// recoverErrors returns every failure a Recover reported: its error, a
// turn's, a policy write's.
func recoverErrors(rep turnframe.RecoverReport, err error) []error {
	errs := []error{err}
	for _, f := range rep.Turns.Failures {
		errs = append(errs, f.Err)
	}
	for _, p := range rep.Policy {
		errs = append(errs, p.Err)
	}
	return errs
}

// recoverAll recovers until nothing is unfinished: what a restart does.
// Nothing may need a person: every unknown outcome here can be looked up.
func (a *app) recoverAll(t *testing.T) {
	t.Helper()
	for range 5 {
		rep, err := a.rec.Recover(bg, turnframe.RecoveryScope{}, a)
		for _, err := range recoverErrors(rep, err) {
			if err != nil {
				t.Fatalf("recover without faults: %v", err)
			}
		}
		if len(rep.NeedsIntervention) > 0 {
			t.Fatalf("recover without faults left %d outcomes to a person: %+v", len(rep.NeedsIntervention), rep.NeedsIntervention)
		}
		if rep.Turns.Turns == 0 && len(rep.Policy) == 0 && len(rep.Expired) == 0 {
			return
		}
	}
	t.Fatal("turns still unfinished after five recoveries")
}

// heldCalls returns, for every command text planned that is Executing (its
// attempt holds it, under a lease), how often its handler ran so far.
func heldCalls(t *testing.T, store turnframe.Store, dom *domain, text string) map[turnframe.IdempotencyKey]int {
	t.Helper()
	held := map[turnframe.IdempotencyKey]int{}
	for _, cmd := range planFor(text).Commands {
		e, err := store.ByKey(bg, faultAccount, cmd.Key)
		if err == nil && e.Status == turnframe.JournalExecuting {
			dom.mu.Lock()
			held[cmd.Key] = dom.calls[cmd.Key]
			dom.mu.Unlock()
		}
	}
	return held
}

// settledOnce checks that each command p planned was admitted and settled
// once: with the status want gives it and as many events of its case (one
// a committing command appends, none a refusal or a reconciliation), and
// applied by the domain at most once. It returns their entries, in p's
// order, for the caller's own checks.
func settledOnce(t *testing.T, store turnframe.Store, dom *domain, p turnframe.Plan,
	want func(turnframe.Command) (status turnframe.JournalStatus, events int)) []turnframe.JournalEntry {
	t.Helper()
	is := is.New(t)
	events, err := store.EventsSince(bg, faultAccount, p.Commands[0].Case, 0, 100)
	is.NoErr(err)
	perKey := map[turnframe.IdempotencyKey]int{}
	for _, ev := range events {
		perKey[ev.Key]++
	}
	var entries []turnframe.JournalEntry
	for _, cmd := range p.Commands {
		e, err := store.ByKey(bg, faultAccount, cmd.Key)
		is.NoErr(err) // every command admitted
		status, n := want(cmd)
		is.Equal(e.Status, status)   // settled as its kind says
		is.Equal(perKey[cmd.Key], n) // its events exactly once, if it appends any
		dom.mu.Lock()
		applied := dom.applied[cmd.Key]
		dom.mu.Unlock()
		is.True(applied <= 1) // the domain applied it at most once
		entries = append(entries, e)
	}
	return entries
}

// checkTurn checks that the commands text planned were each settled once,
// as their kind says, with exactly their rows, and that no turn is left.
func checkTurn(t *testing.T, store turnframe.Store, dom *domain, text string) {
	t.Helper()
	is := is.New(t)
	entries := settledOnce(t, store, dom, planFor(text), func(cmd turnframe.Command) (turnframe.JournalStatus, int) {
		switch cmd.Name {
		case kReject:
			return turnframe.JournalRejected, 0
		case kUnknown:
			return turnframe.JournalCommitted, 0 // reconciled: the domain has it, and a reconciliation appends no event
		}
		return turnframe.JournalCommitted, 1
	})
	for _, e := range entries {
		m, err := store.TurnPhase(bg, faultAccount, e.Turn)
		is.NoErr(err)
		is.Equal(m.Phase, turnframe.PhaseDelivered) // its turn delivered
	}
	unfinished, err := store.ListUnfinishedTurns(bg, turnframe.RecoveryScope{}, 100)
	is.NoErr(err)
	is.Equal(len(unfinished), 0) // nothing left for recovery
}

// rowsOf lists every outbox row by key.
func rowsOf(t *testing.T, store turnframe.Store) map[turnframe.IdempotencyKey][]turnframe.OutboxRecord {
	t.Helper()
	rows, err := store.ListOutbox(bg, turnframe.OutboxFilter{Limit: turnframe.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	out := map[turnframe.IdempotencyKey][]turnframe.OutboxRecord{}
	for _, r := range rows {
		out[r.Key] = append(out[r.Key], r)
	}
	return out
}

func checkRows(t *testing.T, store turnframe.Store, texts ...string) {
	t.Helper()
	is := is.New(t)
	rows := rowsOf(t, store)
	want := 0
	for _, text := range texts {
		for _, cmd := range planFor(text).Commands {
			n := map[string]int{kEnqueue1: 1, kEnqueue2: 2}[cmd.Name]
			for i := range n {
				k := turnframe.OutboxKey(cmd.Key, i, n)
				is.Equal(len(rows[k]), 1) // each row enqueued exactly once
				want++
			}
		}
	}
	total := 0
	for _, rs := range rows {
		total += len(rs)
	}
	is.Equal(total, want) // and no other row
}

type storeKind struct {
	name string
	open func(t *testing.T) turnframe.Store
}

var storeKinds = []storeKind{
	{"memstore", func(t *testing.T) turnframe.Store { return memstore.New() }},
	{"sqlitestore", func(t *testing.T) turnframe.Store {
		s, err := sqlitestore.Open(bg, sqlitefile.Path(t), sqlitestore.WithSynchronousNormal())
		if err != nil {
			t.Fatal(err)
		}
		return s
	}},
}

// eachFault runs body once with no fault to count the store calls it
// makes, then once per call N and mode, with the Nth call failing.
func eachFault(t *testing.T, body func(t *testing.T, k storeKind, fs *faultStore, n int, mode failMode)) {
	for _, k := range storeKinds {
		t.Run(k.name, func(t *testing.T) {
			calls := 0
			t.Run("NoFault", func(t *testing.T) {
				inner := k.open(t)
				t.Cleanup(func() { inner.Close() })
				fs := &faultStore{inner: inner}
				body(t, k, fs, 0, failBefore)
				calls = fs.count()
			})
			if calls == 0 {
				t.Fatal("the scenario made no store call")
			}
			t.Logf("%d store calls, each failed before and after it reaches the store", calls)
			for n := 1; n <= calls; n++ {
				for _, mode := range []failMode{failBefore, failAfter} {
					t.Run(fmt.Sprintf("Call%d/%v", n, mode), func(t *testing.T) {
						inner := k.open(t)
						t.Cleanup(func() { inner.Close() })
						body(t, k, &faultStore{inner: inner}, n, mode)
					})
				}
			}
		})
	}
}

// surfaced checks that an armed fault that fired reached the caller.
func surfaced(t *testing.T, fs *faultStore, errs ...error) {
	t.Helper()
	fs.mu.Lock()
	failed := fs.failed
	fs.mu.Unlock()
	if failed == "" {
		return
	}
	for _, err := range errs {
		if errors.Is(err, errInjected) {
			return
		}
	}
	t.Errorf("the injected failure of %s was swallowed: the caller saw %v", failed, errs)
}

// TestRuntimeFaults: a turn whose Nth store call fails returns the error;
// a recovery sweep (and, when the turn never got written, running it again)
// then completes it: every command settled once, every row enqueued once.
func TestRuntimeFaults(t *testing.T) {
	eachFault(t, func(t *testing.T, k storeKind, fs *faultStore, n int, mode failMode) {
		dom := newDomain()
		a := newApp(fs, dom, t0)
		fs.arm(n, mode)
		err := a.turn(bg, "T")
		surfaced(t, fs, err)
		fs.disarm()
		// A restart while the crashed attempt's lease still runs must not
		// run its command again: it may be running elsewhere.
		held := heldCalls(t, fs, dom, "T")
		early := newApp(fs, dom, t0.Add(time.Second))
		if _, err := early.rec.Recover(bg, turnframe.RecoveryScope{}, early); err != nil {
			t.Fatalf("recover inside the leases: %v", err)
		}
		for key, calls := range held {
			dom.mu.Lock()
			got := dom.calls[key]
			dom.mu.Unlock()
			if got != calls {
				t.Errorf("command %q, held under a live lease, ran again inside it (%d calls, then %d)", key, calls, got)
			}
		}
		restarted := newApp(fs, dom, t0.Add(afterLeases))
		restarted.recoverAll(t)
		if _, err := fs.ByKey(bg, faultAccount, "T-0"); errors.Is(err, turnframe.ErrNotFound) {
			// Nothing was planned: the application runs the turn again.
			if err := restarted.turn(bg, "T"); err != nil {
				t.Fatalf("turn again without faults: %v", err)
			}
		}
		checkTurn(t, fs, dom, "T")
		checkRows(t, fs, "T")
		checkTrail(t, fs, "T")
	})
}

// TestDispatcherFaults: a dispatch whose Nth store call fails reports it
// (an error, or a row Unsettled); recovery past the leases expires its
// claims (outcome unknown, resent under the same key as the destination
// declares no Remote), and dispatching again completes every row, each
// applied at the remote once.
func TestDispatcherFaults(t *testing.T) {
	eachFault(t, func(t *testing.T, k storeKind, fs *faultStore, n int, mode failMode) {
		is := is.New(t)
		dom := newDomain()
		is.NoErr(newApp(fs.inner, dom, t0).turn(bg, "D"))
		is.NoErr(newApp(fs.inner, dom, t0).turn(bg, "E"))
		var mu sync.Mutex
		sends, applied := map[string]int{}, map[string]int{}
		sender := turnframe.SenderFunc(func(ctx context.Context, e turnframe.OutboxEntry) turnframe.Dispatched {
			mu.Lock()
			defer mu.Unlock()
			sends[e.RemoteKey()]++
			if applied[e.RemoteKey()] == 0 {
				applied[e.RemoteKey()]++
			}
			return turnframe.Dispatched{Kind: turnframe.DispatchCompleted}
		})
		d := turnframe.NewDispatcher(fs, sender, turnframe.DispatchConfig{WorkerID: "w1", BatchSize: 2})
		now := t0
		fs.arm(n, mode)
		var errs []error
		unsettled := 0
		for range 10 {
			rep, err := d.RunOnce(bg, now)
			errs = append(errs, err)
			unsettled += len(rep.Unsettled)
			if len(rep.Unsettled) > 0 {
				errs = append(errs, fmt.Errorf("unsettled %v: %w", rep.Unsettled, errInjected))
			}
			if err == nil && rep.IsEmpty() {
				break
			}
		}
		surfaced(t, fs, errs...)
		fs.disarm()
		// At the crash's time no lease has ended: nothing expires.
		rep, err := newApp(fs, dom, now).rec.Recover(bg, turnframe.RecoveryScope{}, nopRecoveryHandler{})
		is.NoErr(err)
		is.Equal(len(rep.Expired), 0) // a live lease is never expired
		// Later: the leases of the failed sweep's claims have ended.
		later := now.Add(afterLeases)
		rep, err = newApp(fs, dom, later).rec.Recover(bg, turnframe.RecoveryScope{}, nopRecoveryHandler{})
		is.NoErr(err)
		for _, p := range rep.Policy {
			is.NoErr(p.Err)                                  // every expired row
			is.Equal(p.Outcome, turnframe.PolicyResent)      // is sent again under its key
			is.Equal(p.Code, turnframe.CodeUndeclaredResend) // as no Remote was declared
		}
		is.Equal(len(rep.Policy), len(rep.Expired)) // and only those
		for range 10 {
			rep, err := d.RunOnce(bg, later)
			is.NoErr(err)
			is.Equal(len(rep.Unsettled), 0)
			if rep.IsEmpty() {
				break
			}
		}
		rows, err := fs.ListOutbox(bg, turnframe.OutboxFilter{Limit: 100})
		is.NoErr(err)
		is.Equal(len(rows), 6) // three rows per turn
		dups := 0
		for _, r := range rows {
			is.Equal(r.Status, turnframe.OutboxCompleted) // nothing lost
			is.Equal(applied[r.RemoteKey()], 1)           // applied once
			is.True(sends[r.RemoteKey()] <= r.Attempts)   // never sent without a claim
			dups += sends[r.RemoteKey()] - 1
		}
		is.True(dups <= unsettled) // only a row whose settlement failed (reported Unsettled) is sent twice
		checkTrail(t, fs, "D", "E")
	})
}

// TestRecoveryFaults: a recovery whose Nth store call fails reports the
// failure; the next recovery finishes every turn, whatever state the crash
// left it in: the unknown outcome of U settled by the policy of its
// command's Remote, which looks it up.
func TestRecoveryFaults(t *testing.T) {
	texts := []string{"R", "P", "X", "C", "U"}
	eachFault(t, func(t *testing.T, k storeKind, fs *faultStore, n int, mode failMode) {
		is := is.New(t)
		dom := newDomain()
		setup := newApp(fs.inner, dom, t0)
		rt := setup.rt
		ids := turnframe.NewIDGenerator()
		// R: received only.
		_, err := rt.Receive(bg, faultAccount, rt.NewConversationID(), "R")
		is.NoErr(err)
		// P: planned, nothing run.
		p, err := rt.Receive(bg, faultAccount, rt.NewConversationID(), "P")
		is.NoErr(err)
		_, err = rt.Plan(bg, faultAccount, p, planFor("P"))
		is.NoErr(err)
		// X: its first command executing (a crash during the handler).
		x, err := rt.Receive(bg, faultAccount, rt.NewConversationID(), "X")
		is.NoErr(err)
		_, err = rt.Plan(bg, faultAccount, x, planFor("X"))
		is.NoErr(err)
		_, err = fs.inner.Apply(bg, turnframe.Write{Account: faultAccount, Turn: x, Now: t0, Phase: turnframe.PhaseExecuting,
			Settle: []turnframe.Settlement{{Key: "X-0", To: turnframe.JournalExecuting, Attempt: ids.AttemptID(t0), Lease: time.Minute}}})
		is.NoErr(err)
		// C: committed, not delivered.
		c, err := rt.Receive(bg, faultAccount, rt.NewConversationID(), "C")
		is.NoErr(err)
		_, err = rt.Plan(bg, faultAccount, c, planFor("C"))
		is.NoErr(err)
		_, err = rt.Execute(bg, faultAccount, c, dom)
		is.NoErr(err)
		// U: delivered while a command is outcome unknown.
		is.NoErr(setup.turn(bg, "U"))

		// The process restarts after X's lease ended, and its sweep fails
		// at call n; the next restart is past the leases that sweep took.
		a := newApp(fs, dom, t0.Add(afterLeases))
		fs.arm(n, mode)
		surfaced(t, fs, recoverErrors(a.rec.Recover(bg, turnframe.RecoveryScope{}, a))...)
		fs.disarm()
		newApp(fs, dom, t0.Add(2*afterLeases)).recoverAll(t)
		for _, text := range texts {
			checkTurn(t, fs, dom, text)
		}
		checkRows(t, fs, texts...)
		checkTrail(t, fs, texts...)
	})
}
