package crashtest_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

// The environment a child reads: the test binary runs itself as a child
// when envRole is set (see TestMain).
const (
	envRole   = "TURNFRAME_CRASHTEST_ROLE" // work, drain, dispatch, releaser
	envDB     = "TURNFRAME_CRASHTEST_DB"
	envRemote = "TURNFRAME_CRASHTEST_REMOTE"
	envSeed   = "TURNFRAME_CRASHTEST_SEED"
	envInc    = "TURNFRAME_CRASHTEST_INC"    // the child's incarnation number: its worker id
	envTurns  = "TURNFRAME_CRASHTEST_TURNS"  // work: stop after this many turns (0: run until killed)
	envFaults = "TURNFRAME_CRASHTEST_FAULTS" // 1: fire the fault points (see faults_test.go)
)

// How the children run. The lease margins are short so that a child started
// after a kill can resume its predecessor's work soon; the send timeout is
// short so that a slow send outlasts a lease margin without timing out.
const (
	commandTimeout      = 150 * time.Millisecond
	commandLeaseMargin  = 500 * time.Millisecond // WithLeaseMargin: a command is held 650 ms at a time
	sendTimeout         = 800 * time.Millisecond
	dispatchLeaseMargin = 300 * time.Millisecond // DispatchConfig.LeaseMargin: a claim is held 1.1 s at a time
	storeBusyTimeout    = 30 * time.Second       // the runtime's store: waits out every fault
	dispatchBusyTimeout = 80 * time.Millisecond  // the dispatcher's store: a held file makes it ErrBusy
	staleAfter          = 2 * time.Second        // a running child's periodic sweep leaves turns younger than this alone
	sweepPage           = 16                     // turns per page of a sweep: sweeps page through many
	drainDeadline       = 2 * time.Minute
	drainPollMax        = 50 * time.Millisecond
	releaseEvery        = 20 * time.Millisecond
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
	kindFlaky    = "flaky"    // first attempt: unknown without reaching the remote (resent by reconciliation); later: as remote
)

// callsRemote reports whether a kind's handler makes a domain call.
func callsRemote(kind string) bool {
	return kind == kindRemote || kind == kindTimeout || kind == kindFlaky
}

// CodeNotReceived is the code of a command whose outcome was unknown and
// that the remote never received.
const codeNotReceived = "remote.not_received"

const commandsPerTurn = 3

// draw returns a number in [0, 100) drawn from the seed and parts, so that
// every random choice of a child can be replayed from the printed seed.
func draw(seed uint64, parts ...any) int {
	h := fnv.New64a()
	fmt.Fprint(h, seed)
	for _, p := range parts {
		fmt.Fprintf(h, "/%v", p)
	}
	return int(h.Sum64() % 100)
}

func kindOf(seed uint64, key string) string {
	switch n := draw(seed, key); {
	case n < 28:
		return kindEnqueue1
	case n < 46:
		return kindEnqueue2
	case n < 56:
		return kindPlain
	case n < 68:
		return kindReject
	case n < 80:
		return kindRemote
	case n < 88:
		return kindTimeout
	}
	return kindFlaky
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

// isLast reports whether key is the last command of its turn's plan.
func isLast(key turnframe.IdempotencyKey) bool {
	return strings.HasSuffix(string(key), fmt.Sprintf("-c%d", commandsPerTurn-1))
}

// child is one process of the crash harness.
type child struct {
	ctx    context.Context
	seed   uint64
	inc    int
	worker string
	role   string
	remote string
	faults bool

	store  *sqlitestore.Store // the runtime's, recovery's and the reads'
	dstore *sqlitestore.Store // the dispatcher's, with a short busy timeout
	astore *sqlitestore.Store // the concurrent actor's (see faults_test.go)
	lockDB *sql.DB            // a plain connection that holds the write lock (the busy fault)

	rt    *turnframe.Runtime
	actor *turnframe.Runtime // another actor on the same turns, on its own connection
	rec   *turnframe.Recovery
	disp  *turnframe.Dispatcher
	out   *observedOutbox

	http  *http.Client // domain calls: a fresh connection each
	spans *http.Client // handler spans

	slow    atomic.Bool // the current sweep's sends are slow
	holding atomic.Bool // the lock connection holds the write lock
	runs    int         // RunOnce calls made (main goroutine only)

	mu    sync.Mutex
	fired map[entryKey]firedFault // faults fired in handlers, checked after Execute
}

// progress writes one line the parent counts; it kills after a random
// number of them.
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stdout, "P "+format+"\n", args...)
}

// fault reports that a fault point fired. It is a progress line, so a kill
// can land right after it.
func fault(name, format string, args ...any) {
	fmt.Fprintf(os.Stdout, "P fault "+name+" "+format+"\n", args...)
}

// seen reports a notable event that is not a fault (a command in flight
// elsewhere, a deferred turn). A progress line too.
func seen(name, format string, args ...any) {
	fmt.Fprintf(os.Stdout, "P seen "+name+" "+format+"\n", args...)
}

// tally adds n to a counter of the parent's without being a progress line.
func tally(name string, n int) {
	if n > 0 {
		fmt.Fprintf(os.Stdout, "F %s %d\n", name, n)
	}
}

func workerName(role string, inc int) string { return fmt.Sprintf("%s-%d", role, inc) }

// sqliteDSN is a DSN for the "sqlite" driver, escaped as sqlitestore does.
func sqliteDSN(path string, params url.Values) string {
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	return "file:" + esc + "?" + params.Encode()
}

func runChild(role string) error {
	ctx := context.Background()
	seed, _ := strconv.ParseUint(os.Getenv(envSeed), 10, 64)
	inc, _ := strconv.Atoi(os.Getenv(envInc))
	db := os.Getenv(envDB)
	c := &child{
		ctx: ctx, seed: seed, inc: inc, worker: workerName(role, inc), role: role,
		remote: os.Getenv(envRemote), faults: os.Getenv(envFaults) == "1",
		http:  &http.Client{Transport: &http.Transport{DisableKeepAlives: true}},
		spans: &http.Client{Timeout: 10 * time.Second},
		fired: map[entryKey]firedFault{},
	}
	var err error
	if c.store, err = sqlitestore.Open(ctx, db, sqlitestore.WithBusyTimeout(storeBusyTimeout)); err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer c.store.Close()
	if c.dstore, err = openWhileBusy(ctx, db, sqlitestore.WithExisting(), sqlitestore.WithBusyTimeout(dispatchBusyTimeout)); err != nil {
		return fmt.Errorf("open the dispatcher's store: %w", err)
	}
	defer c.dstore.Close()
	if c.astore, err = sqlitestore.Open(ctx, db, sqlitestore.WithExisting(), sqlitestore.WithBusyTimeout(storeBusyTimeout)); err != nil {
		return fmt.Errorf("open the actor's store: %w", err)
	}
	defer c.astore.Close()
	if c.lockDB, err = sql.Open("sqlite", sqliteDSN(db, url.Values{"_pragma": {"busy_timeout(100)"}})); err != nil {
		return fmt.Errorf("open the lock connection: %w", err)
	}
	defer c.lockDB.Close()

	opts := []turnframe.Option{
		turnframe.WithCommandTimeout(commandTimeout), turnframe.WithLeaseMargin(commandLeaseMargin),
		turnframe.WithMaxConflictRetries(8), // two processes commit to the same cases
	}
	c.rt = turnframe.New(c.store, opts...)
	c.actor = turnframe.New(c.astore, opts...)
	c.rec = turnframe.NewRecovery(c.store)
	c.out = &observedOutbox{Store: c.dstore, leases: map[turnframe.OutboxID]time.Time{}, settling: map[turnframe.OutboxID]bool{}}
	sender, err := c.sender()
	if err != nil {
		return err
	}
	c.disp = turnframe.NewDispatcher(c.out, sender, turnframe.DispatchConfig{
		WorkerID: c.worker, BatchSize: 8, SendTimeout: sendTimeout, LeaseMargin: dispatchLeaseMargin,
		InitialBackoff: 5 * time.Millisecond, MaxBackoff: 40 * time.Millisecond, MaxAttempts: 8,
	})
	if role != "releaser" {
		progress("open %s", c.worker)
	}
	switch role {
	case "work":
		return c.work()
	case "drain":
		return c.drain()
	case "dispatch":
		return c.dispatchAll()
	case "releaser":
		return c.releaser()
	}
	return fmt.Errorf("unknown role %q", role)
}

// openWhileBusy opens a store with a short busy timeout, trying again while
// another process holds the file (for at most storeBusyTimeout).
func openWhileBusy(ctx context.Context, db string, opts ...sqlitestore.Option) (*sqlitestore.Store, error) {
	deadline := time.Now().Add(storeBusyTimeout)
	for {
		s, err := sqlitestore.Open(ctx, db, opts...)
		if err == nil || !errors.Is(err, turnframe.ErrBusy) || time.Now().After(deadline) {
			return s, err
		}
		tally("busy_open", 1)
	}
}

// ctxEntry carries the row being sent to the transport, which tells the
// remote its attempt number and worker (how the parent explains a
// duplicate delivery) and whether to answer slowly.
type ctxEntry struct{}

type sendTag struct {
	entry turnframe.OutboxEntry
	slow  bool
}

type taggingTransport struct {
	base   http.RoundTripper
	worker string
}

func (t taggingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	if tag, ok := req.Context().Value(ctxEntry{}).(sendTag); ok {
		req.Header.Set("X-Attempt", strconv.Itoa(tag.entry.Attempts))
		if tag.slow {
			req.Header.Set("X-Slow", slowSend.String())
		}
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
		slow := c.slow.Load()
		if slow {
			fault("slow_send", "%s attempt %d", e.Key, e.Attempts)
		}
		d := hs.Send(context.WithValue(ctx, ctxEntry{}, sendTag{entry: e, slow: slow}), e)
		c.busyDuringSettlement(ctx, e, d)
		return d
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
	resp, err := c.http.Get(c.remote + "/applied?key=" + url.QueryEscape(key))
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

// span tells the remote that a handler call begins or ends, so that it can
// see one command running in two places at once. At the beginning the
// handler reads its attempt's lease from the store (a read; a handler never
// writes), which the remote compares with the other calls of the key.
func (c *child) span(op string, call turnframe.Call) {
	lease := int64(0)
	if op == "begin" {
		if e, err := c.store.ByKey(c.ctx, call.Account, call.Command.Key); err == nil &&
			e.Status == turnframe.JournalExecuting && e.Attempt == call.Attempt {
			lease = e.LeaseUntil.UnixMicro()
		}
	}
	u := c.remote + "/span?op=" + op + "&key=" + url.QueryEscape(commandRemoteKey(call.Account, call.Command.Key))
	req, err := http.NewRequestWithContext(c.ctx, http.MethodPost, u, nil)
	if err != nil {
		return
	}
	req.Header.Set("X-Worker", c.worker)
	req.Header.Set("X-Attempt", call.Attempt.String())
	req.Header.Set("X-Lease", strconv.FormatInt(lease, 10))
	if resp, err := c.spans.Do(req); err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

func (c *child) handle(ctx context.Context, call turnframe.Call) turnframe.Outcome {
	c.span("begin", call)
	defer c.span("end", call)
	kind := call.Command.Name
	if kind == kindFlaky && call.Attempts <= 1 {
		kind = "" // the request never leaves: the remote cannot have it
	}
	var callErr error
	if callsRemote(kind) {
		callErr = c.call(ctx, commandRemoteKey(call.Account, call.Command.Key))
	}
	if c.faults && isLast(call.Command.Key) {
		c.actMeanwhile(call) // after the domain call: the effect may be out when the turn moves
	}
	ev := []turnframe.Event{{Case: call.Command.Case, Type: call.Command.Name, Data: call.Command.Payload}}
	switch kind {
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
	case kindRemote, kindFlaky:
		if callErr != nil {
			return turnframe.Unknown("")
		}
		return turnframe.Commit(ev)
	case kindTimeout:
		<-ctx.Done() // the remote never answers in time: outcome unknown
		return turnframe.Unknown("")
	case "":
		return turnframe.Unknown("") // a flaky command's first attempt
	}
	return turnframe.Reject("unknown_kind")
}

func (c *child) handler() turnframe.Handler { return turnframe.HandlerFunc(c.handle) }

// errDeferred marks a turn left for later: another process holds one of
// its commands, or moved it meanwhile. A later sweep finishes it.
var errDeferred = errors.New("deferred: another process holds the turn")

// finish executes a turn's pending commands and delivers it. It reports
// deferred when another attempt holds one of its commands under a live
// lease (ResultInFlight), or another process moved it meanwhile: a later
// sweep finishes it.
func (c *child) finish(ctx context.Context, account turnframe.AccountID, turn turnframe.TurnID) (deferred bool, err error) {
	for range 4 {
		rep, err := c.rt.Execute(ctx, account, turn, c.handler())
		if ferr := c.checkFired(ctx, turn, err); ferr != nil {
			return false, ferr
		}
		if err != nil {
			if !errors.Is(err, turnframe.ErrConflict) {
				return false, fmt.Errorf("execute %v: %w", turn, err)
			}
			if m, rerr := c.store.TurnPhase(ctx, account, turn); rerr == nil && m.Phase.IsTerminal() {
				return false, nil // abandoned or delivered meanwhile
			}
			seen("deferred", "%v: %v", turn, err) // the case kept moving, or another attempt took a command
			return true, nil
		}
		progress("executed %v", turn)
		for _, r := range rep.Results {
			if r.Kind == turnframe.ResultInFlight {
				seen("in_flight", "%v %s", turn, r.Key)
				return true, nil
			}
		}
		switch {
		case rep.Phase.IsTerminal():
			return false, nil // abandoned while a command ran (a fault), or delivered
		case rep.Phase != turnframe.PhaseCommitted:
			continue // an entry went back to pending meanwhile (a resend): run it
		}
		err = c.rt.Deliver(ctx, account, turn, "done")
		if err == nil {
			progress("delivered %v", turn)
			return false, nil
		}
		if !errors.Is(err, turnframe.ErrConflict) {
			return false, fmt.Errorf("deliver %v: %w", turn, err)
		}
		if m, rerr := c.store.TurnPhase(ctx, account, turn); rerr == nil && m.Phase.IsTerminal() {
			return false, nil // another process delivered it
		}
		// Pending again: a reconciliation resent one of its commands. Run it.
	}
	return true, nil
}

// The recovery handler: what a child does with every unfinished turn it
// finds. A turn another process holds is deferred.
func (c *child) RestartInterpretation(ctx context.Context, m turnframe.TurnPhaseMarker, _ turnframe.RecoveryAction) error {
	st, err := c.rec.StoredTurn(ctx, m.Account, m.Turn)
	if err != nil {
		return err
	}
	if _, err := c.rt.Plan(ctx, m.Account, m.Turn, planFor(c.seed, st.Text)); err != nil {
		if errors.Is(err, turnframe.ErrConflict) {
			return fmt.Errorf("re-plan: %w (%w)", errDeferred, err) // another process planned and moved it
		}
		return fmt.Errorf("re-plan: %w", err)
	}
	progress("replanned %v", m.Turn)
	return c.finishOrDefer(ctx, m)
}

func (c *child) finishOrDefer(ctx context.Context, m turnframe.TurnPhaseMarker) error {
	deferred, err := c.finish(ctx, m.Account, m.Turn)
	if err == nil && deferred {
		return errDeferred
	}
	return err
}

func (c *child) ResumeCommands(ctx context.Context, m turnframe.TurnPhaseMarker, _ turnframe.RecoveryAction) error {
	progress("resume %v", m.Turn)
	return c.finishOrDefer(ctx, m)
}

func (c *child) RegenerateResponse(ctx context.Context, m turnframe.TurnPhaseMarker, a turnframe.RecoveryAction) error {
	err := c.rt.Deliver(ctx, m.Account, m.Turn, fmt.Sprintf("regenerated from %d events", len(a.Events)))
	if errors.Is(err, turnframe.ErrConflict) {
		if now, rerr := c.store.TurnPhase(ctx, m.Account, m.Turn); rerr == nil && now.Phase.IsTerminal() {
			return nil // another process answered it
		}
		return fmt.Errorf("regenerate: %w (%w)", errDeferred, err)
	}
	if err != nil {
		return err
	}
	progress("regenerated %v", m.Turn)
	return nil
}

// ReconcileExternal settles each unknown command against the remote's
// ledger: it has the key (Completed); it never received it and the command
// may run again (a flaky one, on a turn not abandoned: Resend); else
// Rejected.
func (c *child) ReconcileExternal(ctx context.Context, m turnframe.TurnPhaseMarker, a turnframe.RecoveryAction) error {
	for _, e := range a.Entries {
		ok, err := c.applied(commandRemoteKey(e.Account, e.Key))
		if err != nil {
			return err
		}
		verdict, code := turnframe.VerdictFailed, codeNotReceived
		switch {
		case ok:
			verdict, code = turnframe.VerdictCompleted, ""
		case e.Name == kindFlaky && m.Phase != turnframe.PhaseAbandoned:
			verdict, code = turnframe.VerdictResend, ""
		}
		err = c.rt.ReconcileCommand(ctx, e.Account, e.Key, verdict, code)
		if errors.Is(err, turnframe.ErrConflict) && verdict == turnframe.VerdictResend {
			// The turn was abandoned since it was listed: a resend there
			// would never run. The remote does not have it: Rejected.
			verdict, code = turnframe.VerdictFailed, codeNotReceived
			err = c.rt.ReconcileCommand(ctx, e.Account, e.Key, verdict, code)
		}
		if errors.Is(err, turnframe.ErrConflict) {
			if now, rerr := c.store.ByKey(ctx, e.Account, e.Key); rerr == nil && now.Status != turnframe.JournalOutcomeUnknown {
				continue // another process reconciled it
			}
			return fmt.Errorf("reconcile %s: %w (%w)", e.Key, errDeferred, err) // it moved meanwhile: look again later
		}
		if err != nil {
			return err
		}
		progress("reconciled command %s %v", e.Key, verdict)
	}
	if m.Phase.IsTerminal() {
		return nil
	}
	return c.finishOrDefer(ctx, m)
}

// release releases the claims whose lease ended, and names each released
// row with the worker that held it ("R id worker"), so the parent can check
// that no live worker lost a row.
func (c *child) release() (int, error) {
	held, err := c.store.ListOutbox(c.ctx, turnframe.OutboxFilter{Status: turnframe.OutboxDispatching, Limit: turnframe.MaxLimit})
	if err != nil {
		return 0, err
	}
	holder := make(map[turnframe.OutboxID]string, len(held))
	for _, r := range held {
		holder[r.ID] = r.ClaimedBy
	}
	ids, err := c.disp.ReleaseExpiredClaims(c.ctx, time.Now())
	if errors.Is(err, turnframe.ErrBusy) {
		tally("busy_release", 1) // the file is held: the next call releases them
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	for _, id := range ids {
		w := holder[id]
		if w == "" {
			w = "?"
		}
		fmt.Fprintf(os.Stdout, "R %s %s %s\n", id, w, c.worker)
	}
	return len(ids), nil
}

// recover releases ended leases and sweeps every unfinished turn in scope.
// Turns another process holds are deferred and counted, not failed: a later
// sweep takes them once their leases ended.
func (c *child) recover(scope turnframe.RecoveryScope) (deferred int, err error) {
	n, err := c.release()
	if err != nil {
		return 0, fmt.Errorf("release: %w", err)
	}
	progress("released %d", n)
	for range 3 { // a reconciliation can leave a turn for a resume: sweep again
		rep, err := c.rec.Sweep(c.ctx, scope, sweepPage, c)
		if err != nil {
			return 0, fmt.Errorf("sweep: %w", err)
		}
		deferred = 0
		for _, f := range rep.Failures {
			if errors.Is(f.Err, errDeferred) {
				deferred++
				continue
			}
			return 0, fmt.Errorf("sweep: turn %v (%v): %w", f.Turn, f.Action, f.Err)
		}
		tally("swept", rep.Turns)
		progress("swept %d, deferred %d", rep.Turns, deferred)
		if rep.Turns == deferred {
			break
		}
	}
	tally("sweep_deferred", deferred)
	return deferred, nil
}

// dispatchOnce runs one dispatch sweep, slow now and then (a fault). A
// claim refused because the file is busy is no error: the next sweep
// claims. A row left unsettled in a live process is: its settlement was
// refused for good (the claim was lost, so a live sweep's row was
// released) — the one thing leases are there to prevent.
func (c *child) dispatchOnce() (turnframe.DispatchReport, error) {
	c.runs++
	slow, err := c.slowSweep()
	if err != nil {
		return turnframe.DispatchReport{}, err
	}
	c.slow.Store(slow)
	rep, err := c.disp.RunOnce(c.ctx, time.Now())
	c.slow.Store(false)
	if errors.Is(err, turnframe.ErrBusy) {
		return rep, nil
	}
	if err != nil {
		return rep, err
	}
	if !rep.IsEmpty() {
		progress("dispatched %d completed=%d retried=%d failed=%d unknown=%d unsettled=%d",
			rep.Claimed(), len(rep.Completed), len(rep.Retried), len(rep.Failed), len(rep.Unknown), len(rep.Unsettled))
	}
	if len(rep.Unsettled) > 0 {
		return rep, fmt.Errorf("%d rows unsettled in a live process (first %v): a live sweep lost its claim", len(rep.Unsettled), rep.Unsettled[0])
	}
	return rep, nil
}

var accounts = []turnframe.AccountID{"acct-1", "acct-2"}

// work: recover, then receive, plan, execute and deliver turns and
// dispatch after each, until killed (or TURNFRAME_CRASHTEST_TURNS turns).
// Every few turns it runs the periodic recovery of a running process:
// ended leases, and turns untouched for a while.
func (c *child) work() error {
	// At start-up, as the docs advise: everything. Another child may be
	// running, or recovering at the same moment.
	if _, err := c.recover(turnframe.RecoveryScope{}); err != nil {
		return err
	}
	if _, err := c.dispatchOnce(); err != nil {
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
		_, err = c.rt.Plan(c.ctx, account, turn, planFor(c.seed, text))
		switch {
		case errors.Is(err, turnframe.ErrConflict):
			seen("deferred", "%v: another process planned it and moved on: %v", turn, err)
		case err != nil:
			return fmt.Errorf("plan: %w", err)
		default:
			progress("planned %v", turn)
			if _, err := c.finish(c.ctx, account, turn); err != nil {
				return err
			}
		}
		if i%3 == 2 { // every third turn, so that a sweep has several rows to send
			if _, err := c.dispatchOnce(); err != nil {
				return err
			}
		}
		if i%6 == 5 {
			if _, err := c.recover(turnframe.RecoveryScope{UpdatedBefore: time.Now().Add(-staleAfter)}); err != nil {
				return err
			}
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

// drain finishes everything, beside another drain doing the same: recover,
// dispatch until nothing is due, reconcile unknown rows against the ledger,
// and again, until nothing is unfinished — waiting for leases to end and
// backoffs to come due, never longer than the earliest of them (at most
// drainPollMax), and failing after drainDeadline.
func (c *child) drain() error {
	deadline := time.Now().Add(drainDeadline)
	for round := 0; ; round++ {
		if _, err := c.recover(turnframe.RecoveryScope{}); err != nil {
			return err
		}
		for {
			rep, err := c.dispatchOnce()
			if err != nil {
				return err
			}
			if rep.IsEmpty() {
				break
			}
		}
		if err := c.reconcileRows(); err != nil {
			return err
		}
		open, wake, err := c.openWork()
		if err != nil {
			return err
		}
		if open == "" {
			progress("drained after %d rounds", round)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("drain: still open after %v: %s", drainDeadline, open)
		}
		t := time.NewTimer(time.Until(wake))
		<-t.C
	}
}

// reconcileRows settles every unknown outbox row against the ledger.
func (c *child) reconcileRows() error {
	unknown, err := c.store.ListOutbox(c.ctx, turnframe.OutboxFilter{Status: turnframe.OutboxOutcomeUnknown, Limit: turnframe.MaxLimit})
	if err != nil {
		return err
	}
	for _, r := range unknown {
		v, err := c.disp.Reconcile(c.ctx, r.ID, c.ledgerReconciler(), time.Now())
		if errors.Is(err, turnframe.ErrConflict) || errors.Is(err, turnframe.ErrBusy) {
			continue // the other drain reconciled it, or the file is held: next round
		}
		if err != nil {
			return fmt.Errorf("reconcile row %v: %w", r.ID, err)
		}
		progress("reconciled row %v %v", r.ID, v.Verdict)
	}
	return nil
}

// openWork says what is still unfinished ("" for nothing), and when to look
// again: the earliest lease end or due time of an open row, or soon.
func (c *child) openWork() (string, time.Time, error) {
	now := time.Now()
	wake := now.Add(drainPollMax)
	turns, err := c.store.ListUnfinishedTurns(c.ctx, turnframe.RecoveryScope{}, turnframe.MaxLimit)
	if err != nil {
		return "", wake, err
	}
	var open []string
	if len(turns) > 0 {
		open = append(open, fmt.Sprintf("%d unfinished turns (first %v, %v)", len(turns), turns[0].Turn, turns[0].Phase))
	}
	for _, st := range []turnframe.OutboxStatus{turnframe.OutboxPending, turnframe.OutboxDispatching, turnframe.OutboxOutcomeUnknown} {
		rows, err := c.store.ListOutbox(c.ctx, turnframe.OutboxFilter{Status: st, Limit: turnframe.MaxLimit})
		if err != nil {
			return "", wake, err
		}
		if len(rows) > 0 {
			open = append(open, fmt.Sprintf("%d rows %v", len(rows), st))
		}
		for _, r := range rows {
			at := r.DueAt
			if st == turnframe.OutboxDispatching {
				at = r.LeaseUntil
			}
			if !at.IsZero() && at.Before(wake) {
				wake = at
			}
		}
	}
	if floor := now.Add(2 * time.Millisecond); wake.Before(floor) {
		wake = floor
	}
	return strings.Join(open, ", "), wake, nil
}

// dispatchAll: dispatch until nothing is due, several times in a row (the
// other processes may still hold rows), never releasing a claim.
func (c *child) dispatchAll() error {
	empty := 0
	for empty < 3 {
		rep, err := c.disp.RunOnce(c.ctx, time.Now())
		if errors.Is(err, turnframe.ErrBusy) {
			continue // another process holds the file: claim again
		}
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

// releaser calls ReleaseExpiredClaims again and again, beside the workers,
// until its stdin closes: a live sweep's rows must never be released, and
// a dead worker's are released once their leases ended.
func (c *child) releaser() error {
	stop := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(stop)
	}()
	tick := time.NewTicker(releaseEvery)
	defer tick.Stop()
	calls := 0
	for {
		select {
		case <-stop:
			tally("release_calls", calls)
			return nil
		case <-tick.C:
			calls++
			if _, err := c.release(); err != nil {
				return err
			}
		}
	}
}
