package crashtest_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

// The environment a child reads: the test binary runs itself as a child
// when envRole is set (see TestMain).
const (
	envRole   = "TURNFRAME_CRASHTEST_ROLE" // work, drain, dispatch
	envDB     = "TURNFRAME_CRASHTEST_DB"
	envRemote = "TURNFRAME_CRASHTEST_REMOTE"
	envSeed   = "TURNFRAME_CRASHTEST_SEED"
	envInc    = "TURNFRAME_CRASHTEST_INC"   // the child's incarnation number: its worker id
	envTurns  = "TURNFRAME_CRASHTEST_TURNS" // work: stop after this many turns (0: run until killed)
)

// Command kinds, carried as the command's Name so that a resumed command
// is handled as it was planned.
const (
	kindEnqueue1 = "enqueue1" // commit one event and one outbox row
	kindEnqueue2 = "enqueue2" // commit one event and two rows, the second ordered
	kindPlain    = "plain"    // commit one event, no row
	kindReject   = "reject"   // reject
	kindRemote   = "remote"   // call the remote under the command's key, then commit one event
	kindTimeout  = "timeout"  // call the remote, then block until the command timeout: outcome unknown
)

// CodeNotReceived is the code of a command whose outcome was unknown and
// that the remote never received.
const codeNotReceived = "remote.not_received"

const commandsPerTurn = 3

func kindOf(seed uint64, key string) string {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%s", seed, key)
	switch n := h.Sum64() % 100; {
	case n < 30:
		return kindEnqueue1
	case n < 50:
		return kindEnqueue2
	case n < 62:
		return kindPlain
	case n < 77:
		return kindReject
	case n < 89:
		return kindRemote
	}
	return kindTimeout
}

// expectedRows is how many outbox rows a committed command of kind enqueues.
func expectedRows(kind string) int {
	switch kind {
	case kindEnqueue1:
		return 1
	case kindEnqueue2:
		return 2
	}
	return 0
}

// planFor derives a turn's plan from its text alone, so a turn received by
// a child that was killed before planning is planned the same by the next.
func planFor(seed uint64, text string) turnframe.Plan {
	var p turnframe.Plan
	for j := range commandsPerTurn {
		key := fmt.Sprintf("%s-c%d", text, j)
		p.Commands = append(p.Commands, turnframe.Command{
			Key:     turnframe.IdempotencyKey(key),
			Case:    turnframe.CaseKey(fmt.Sprintf("case-%d", j)),
			Name:    kindOf(seed, key),
			Payload: []byte(key),
		})
	}
	return p
}

// child is one process of the crash harness.
type child struct {
	ctx    context.Context
	seed   uint64
	inc    int
	worker string
	remote string
	store  *sqlitestore.Store
	rt     *turnframe.Runtime
	rec    *turnframe.Recovery
	disp   *turnframe.Dispatcher
	http   *http.Client
}

// progress writes one line the parent counts; it kills after a random
// number of them.
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stdout, "P "+format+"\n", args...)
}

func runChild(role string) error {
	ctx := context.Background()
	seed, _ := strconv.ParseUint(os.Getenv(envSeed), 10, 64)
	inc, _ := strconv.Atoi(os.Getenv(envInc))
	store, err := sqlitestore.Open(ctx, os.Getenv(envDB), sqlitestore.WithBusyTimeout(30*time.Second))
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer store.Close()
	c := &child{
		ctx: ctx, seed: seed, inc: inc, worker: fmt.Sprintf("child-%d", inc),
		remote: os.Getenv(envRemote), store: store,
		http: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}},
	}
	c.rt = turnframe.New(store, turnframe.WithCommandTimeout(150*time.Millisecond))
	c.rec = turnframe.NewRecovery(store)
	sender, err := c.sender()
	if err != nil {
		return err
	}
	c.disp = turnframe.NewDispatcher(store, sender, turnframe.DispatchConfig{
		WorkerID: c.worker, BatchSize: 8, SendTimeout: 5 * time.Second,
		InitialBackoff: 5 * time.Millisecond, MaxBackoff: 40 * time.Millisecond, MaxAttempts: 8,
	})
	progress("open %s", role)
	switch role {
	case "work":
		return c.work()
	case "drain":
		return c.drain()
	case "dispatch":
		return c.dispatchAll()
	}
	return fmt.Errorf("unknown role %q", role)
}

// ctxEntry carries the row being sent to the transport, which tells the
// remote its attempt number and worker: how the parent explains a
// duplicate delivery.
type ctxEntry struct{}

type taggingTransport struct {
	base   http.RoundTripper
	worker string
}

func (t taggingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	if e, ok := req.Context().Value(ctxEntry{}).(turnframe.OutboxEntry); ok {
		req.Header.Set("X-Attempt", strconv.Itoa(e.Attempts))
	}
	req.Header.Set("X-Worker", t.worker)
	return t.base.RoundTrip(req)
}

func (c *child) sender() (turnframe.Sender, error) {
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.DisableKeepAlives = true
	hs, err := turnframe.NewHTTPSender(map[string]string{"remote": c.remote + "/send"},
		turnframe.WithHTTPClient(&http.Client{Transport: taggingTransport{base: base, worker: c.worker}}))
	if err != nil {
		return nil, err
	}
	return turnframe.SenderFunc(func(ctx context.Context, e turnframe.OutboxEntry) turnframe.Dispatched {
		return hs.Send(context.WithValue(ctx, ctxEntry{}, e), e)
	}), nil
}

// call makes a domain call to the remote under key.
func (c *child) call(ctx context.Context, key string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.remote+"/cmd", strings.NewReader(key))
	if err != nil {
		return err
	}
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("X-Worker", c.worker)
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return nil
}

// applied asks the remote whether key's effect is there.
func (c *child) applied(key string) (bool, error) {
	resp, err := c.http.Get(c.remote + "/applied?key=" + key)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b) == "yes", err
}

func commandRemoteKey(account turnframe.AccountID, key turnframe.IdempotencyKey) string {
	return "cmd." + string(account) + "." + string(key)
}

func (c *child) handle(ctx context.Context, call turnframe.Call) turnframe.Outcome {
	ev := []turnframe.Event{{Case: call.Command.Case, Type: call.Command.Name, Data: call.Command.Payload}}
	switch call.Command.Name {
	case kindEnqueue1:
		return turnframe.Commit(ev, turnframe.OutboxMessage{Destination: "remote", Payload: call.Command.Payload})
	case kindEnqueue2:
		return turnframe.Commit(ev,
			turnframe.OutboxMessage{Destination: "remote", Payload: call.Command.Payload},
			turnframe.OutboxMessage{Destination: "remote", Payload: call.Command.Payload, OrderKey: "ord-" + string(call.Command.Case)})
	case kindPlain:
		return turnframe.Commit(ev)
	case kindReject:
		return turnframe.Reject("sold_out")
	case kindRemote:
		if err := c.call(ctx, commandRemoteKey(call.Account, call.Command.Key)); err != nil {
			return turnframe.Unknown("")
		}
		return turnframe.Commit(ev)
	case kindTimeout:
		_ = c.call(ctx, commandRemoteKey(call.Account, call.Command.Key))
		<-ctx.Done() // the remote never answers in time: outcome unknown
		return turnframe.Unknown("")
	}
	return turnframe.Reject("unknown_kind")
}

func (c *child) handler() turnframe.Handler { return turnframe.HandlerFunc(c.handle) }

// finish executes a turn's pending commands and delivers it.
func (c *child) finish(account turnframe.AccountID, turn turnframe.TurnID) error {
	rep, err := c.rt.Execute(c.ctx, account, turn, c.handler())
	if err != nil {
		return fmt.Errorf("execute %v: %w", turn, err)
	}
	progress("executed %v", turn)
	if rep.Phase.IsTerminal() {
		return nil
	}
	if err := c.rt.Deliver(c.ctx, account, turn, "done"); err != nil {
		return fmt.Errorf("deliver %v: %w", turn, err)
	}
	progress("delivered %v", turn)
	return nil
}

// The recovery handler: what a child does with every unfinished turn it
// finds at start.
func (c *child) RestartInterpretation(ctx context.Context, m turnframe.TurnPhaseMarker, _ turnframe.RecoveryAction) error {
	st, err := c.rec.StoredTurn(ctx, m.Account, m.Turn)
	if err != nil {
		return err
	}
	if _, err := c.rt.Plan(ctx, m.Account, m.Turn, planFor(c.seed, st.Text)); err != nil {
		return fmt.Errorf("re-plan: %w", err)
	}
	progress("replanned %v", m.Turn)
	return c.finish(m.Account, m.Turn)
}

func (c *child) ResumeCommands(ctx context.Context, m turnframe.TurnPhaseMarker, _ turnframe.RecoveryAction) error {
	progress("resume %v", m.Turn)
	return c.finish(m.Account, m.Turn)
}

func (c *child) RegenerateResponse(ctx context.Context, m turnframe.TurnPhaseMarker, a turnframe.RecoveryAction) error {
	if err := c.rt.Deliver(ctx, m.Account, m.Turn, fmt.Sprintf("regenerated from %d events", len(a.Events))); err != nil {
		return err
	}
	progress("regenerated %v", m.Turn)
	return nil
}

// ReconcileExternal settles each unknown command against the remote's
// ledger: it has the key (Completed) or it never received it (Rejected).
func (c *child) ReconcileExternal(ctx context.Context, m turnframe.TurnPhaseMarker, a turnframe.RecoveryAction) error {
	for _, e := range a.Entries {
		ok, err := c.applied(commandRemoteKey(e.Account, e.Key))
		if err != nil {
			return err
		}
		verdict, code := turnframe.VerdictFailed, codeNotReceived
		if ok {
			verdict, code = turnframe.VerdictCompleted, ""
		}
		if err := c.rt.ReconcileCommand(ctx, e.Account, e.Key, verdict, code); err != nil {
			return err
		}
		progress("reconciled command %s %v", e.Key, verdict)
	}
	if m.Phase.IsTerminal() {
		return nil
	}
	return c.finish(m.Account, m.Turn)
}

// recover releases the claims of dead workers and sweeps every unfinished
// turn. Only one child runs at a time in the crash test, so every claim
// found is a dead child's.
func (c *child) recover() error {
	ids, err := c.disp.ReleaseExpiredClaims(c.ctx, time.Now())
	if err != nil {
		return err
	}
	progress("released %d", len(ids))
	for range 3 { // a reconciliation can leave a turn for a resume: sweep again
		rep, err := c.rec.Sweep(c.ctx, turnframe.RecoveryScope{}, turnframe.MaxLimit, c)
		if err != nil {
			return fmt.Errorf("sweep: %w", err)
		}
		if len(rep.Failures) > 0 {
			return fmt.Errorf("sweep: %d turns failed, first: %w", len(rep.Failures), rep.Failures[0].Err)
		}
		progress("swept %d", rep.Turns)
		if rep.Turns == 0 {
			break
		}
	}
	return nil
}

func (c *child) dispatchOnce(now time.Time) (turnframe.DispatchReport, error) {
	rep, err := c.disp.RunOnce(c.ctx, now)
	if err != nil {
		return rep, err
	}
	if !rep.IsEmpty() {
		progress("dispatched %d completed=%d retried=%d failed=%d unknown=%d unsettled=%d",
			rep.Claimed(), len(rep.Completed), len(rep.Retried), len(rep.Failed), len(rep.Unknown), len(rep.Unsettled))
	}
	if len(rep.Unsettled) > 0 {
		return rep, fmt.Errorf("%d rows unsettled with one process on the file", len(rep.Unsettled))
	}
	return rep, nil
}

var accounts = []turnframe.AccountID{"acct-1", "acct-2"}

// work: recover, then receive, plan, execute and deliver turns and
// dispatch after each, until killed (or TURNFRAME_CRASHTEST_TURNS turns).
func (c *child) work() error {
	if err := c.recover(); err != nil {
		return err
	}
	limit, _ := strconv.Atoi(os.Getenv(envTurns))
	conv := c.rt.NewConversationID()
	for i := 0; limit == 0 || i < limit; i++ {
		// Both accounts use the same texts, hence the same command keys:
		// keys are per tenant, and so must their effects be.
		account := accounts[i%2]
		text := fmt.Sprintf("t%d-%d", c.inc, i/2)
		turn, err := c.rt.Receive(c.ctx, account, conv, text)
		if err != nil {
			return fmt.Errorf("receive: %w", err)
		}
		progress("received %v", turn)
		if _, err := c.rt.Plan(c.ctx, account, turn, planFor(c.seed, text)); err != nil {
			return fmt.Errorf("plan: %w", err)
		}
		progress("planned %v", turn)
		if err := c.finish(account, turn); err != nil {
			return err
		}
		if _, err := c.dispatchOnce(time.Now()); err != nil {
			return err
		}
	}
	return nil
}

// ledgerReconciler settles an unknown outbox row by asking the remote:
// applied → Completed, never received → Resend.
func (c *child) ledgerReconciler() turnframe.Reconciler {
	return turnframe.ReconcilerFunc(func(ctx context.Context, rec turnframe.OutboxRecord) turnframe.Reconciled {
		ok, err := c.applied(rec.RemoteKey())
		switch {
		case err != nil:
			return turnframe.Reconciled{Verdict: turnframe.VerdictUnresolved}
		case ok:
			return turnframe.Reconciled{Verdict: turnframe.VerdictCompleted}
		}
		return turnframe.Reconciled{Verdict: turnframe.VerdictResend}
	})
}

// drain finishes everything: recover, then dispatch with the clock moved
// ahead a minute a round (so every backoff is due), reconciling unknown rows
// against the ledger, until no row is left to send.
func (c *child) drain() error {
	if err := c.recover(); err != nil {
		return err
	}
	now := time.Now()
	for round := 0; ; round++ {
		if round > 500 {
			return errors.New("drain: rows still open after 500 rounds")
		}
		rep, err := c.dispatchOnce(now)
		if err != nil {
			return err
		}
		if !rep.IsEmpty() {
			continue
		}
		unknown, err := c.store.ListOutbox(c.ctx, turnframe.OutboxFilter{Status: turnframe.OutboxOutcomeUnknown, Limit: turnframe.MaxLimit})
		if err != nil {
			return err
		}
		for _, r := range unknown {
			v, err := c.disp.Reconcile(c.ctx, r.ID, c.ledgerReconciler(), now)
			if err != nil {
				return fmt.Errorf("reconcile row %v: %w", r.ID, err)
			}
			progress("reconciled row %v %v", r.ID, v.Verdict)
		}
		open := 0
		for _, st := range []turnframe.OutboxStatus{turnframe.OutboxPending, turnframe.OutboxDispatching, turnframe.OutboxOutcomeUnknown} {
			rows, err := c.store.ListOutbox(c.ctx, turnframe.OutboxFilter{Status: st, Limit: turnframe.MaxLimit})
			if err != nil {
				return err
			}
			open += len(rows)
		}
		if open == 0 {
			progress("drained after %d rounds", round)
			return nil
		}
		now = now.Add(time.Minute)
	}
}

// dispatchAll: dispatch until nothing is due, several times in a row (the
// other processes may still hold rows), never releasing a claim.
func (c *child) dispatchAll() error {
	empty := 0
	for empty < 3 {
		rep, err := c.disp.RunOnce(c.ctx, time.Now())
		if err != nil {
			return err
		}
		if len(rep.Unsettled) > 0 {
			return fmt.Errorf("%d rows unsettled", len(rep.Unsettled))
		}
		if rep.IsEmpty() {
			empty++
			continue
		}
		empty = 0
		progress("dispatched %d", rep.Claimed())
	}
	return nil
}

var _ = net.ErrClosed
