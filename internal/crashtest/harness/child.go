package harness

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/turnframe/turnframe"
)

// The environment a child reads: the test binary runs itself as a child
// when envRole is set (see TestMain).
const (
	envRole   = "TURNFRAME_CRASHTEST_ROLE" // work, drain, dispatch, expirer
	envDB     = "TURNFRAME_CRASHTEST_DB"
	envRemote = "TURNFRAME_CRASHTEST_REMOTE"      // the remote's URL
	envKind   = "TURNFRAME_CRASHTEST_REMOTE_KIND" // what the remote can do (remoteDedup, remoteAsked, remoteNeither; dedup when unset)
	envSeed   = "TURNFRAME_CRASHTEST_SEED"
	envInc    = "TURNFRAME_CRASHTEST_INC"    // the child's incarnation number: its worker id
	envTurns  = "TURNFRAME_CRASHTEST_TURNS"  // work: stop after this many turns (0: run until killed)
	envFaults = "TURNFRAME_CRASHTEST_FAULTS" // 1: fire the fault points (see faults.go)
	// The platform's log (platform.go): work and drain deliver and
	// redeliver the users' messages through it. Unset: no log is kept, and
	// nothing is redelivered at start-up.
	envPlatform = "TURNFRAME_CRASHTEST_PLATFORM"
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
	dispatchBusyTimeout = 80 * time.Millisecond  // the dispatcher's store: a held database makes it ErrBusy
	staleAfter          = 2 * time.Second        // a running child's periodic sweep leaves turns younger than this alone
	drainDeadline       = 2 * time.Minute
	drainPollMax        = 50 * time.Millisecond
	expireEvery         = 20 * time.Millisecond
	verifyBackoff       = 5 * time.Millisecond // the asked kind's Remote.VerifyBackoff: short, so the drain ends
	crashActor          = turnframe.Actor("app:crash-actor")
)

// The kinds of remote a crash run is made against: what the remote can do,
// and so what the children declare for it (turnframe.Remote) for the
// destination "remote" and for every command that calls it.
const (
	// remoteDedup deduplicates by key, and is declared so
	// (Remote{Deduplicates: 24h}): the policy resends an unknown under the
	// same key, and Execute runs a dead attempt again.
	remoteDedup = "dedup"
	// remoteAsked can be asked whether a key's effect is there (GET
	// /applied), and is declared with that Verifier and no Deduplicates:
	// nothing is sent again without a "not happened". The remote still
	// deduplicates; the audit counts every delivery that would have been
	// a second effect had it not.
	remoteAsked = "asked"
	// remoteNeither can be neither asked nor sent a key twice, and is
	// declared Remote{}: a second delivery of an applied key is a second
	// effect. Every unknown escalates to NeedsIntervention.
	remoteNeither = "neither"
)

// remoteKinds are the kinds TestCrashRecovery runs, in order.
var remoteKinds = []string{remoteDedup, remoteAsked, remoteNeither}

// Command kinds, carried as the command's Name so that a resumed command
// is handled as it was planned.
const (
	kindEnqueue1 = "enqueue1" // commit one event and one outbox row
	kindEnqueue2 = "enqueue2" // commit one event and two rows, the second ordered
	kindPlain    = "plain"    // commit one event, no row
	kindReject   = "reject"   // reject
	kindRemote   = "remote"   // call the remote under the command's key, then commit one event
	kindTimeout  = "timeout"  // first attempt: call the remote, then block until the command timeout (outcome unknown); later: as remote
	kindFlaky    = "flaky"    // first attempt: unknown without reaching the remote (resent by the policy, or escalated); later: as remote
)

// localKinds are the command kinds whose handlers call no remote.
var localKinds = []string{kindEnqueue1, kindEnqueue2, kindPlain, kindReject}

// remoteCallKinds are the command kinds whose handlers call the remote.
var remoteCallKinds = []string{kindRemote, kindTimeout, kindFlaky}

// callsRemote reports whether a kind's handler makes a domain call.
func callsRemote(kind string) bool {
	return kind == kindRemote || kind == kindTimeout || kind == kindFlaky
}

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
	kind   string // remoteDedup, remoteAsked or remoteNeither
	faults bool

	backend Backend
	store   turnframe.Store // the runtime's, recovery's and the reads'
	dstore  turnframe.Store // the dispatcher's, with a short busy timeout
	astore  turnframe.Store // the concurrent actor's (see faults.go)
	locker  Locker          // holds the writes up (the busy fault); nil when the backend has none

	rt       *turnframe.Runtime
	actor    *turnframe.Runtime  // another actor on the same turns, on its own connection
	actorRec *turnframe.Recovery // the actor's, to resend a command (fault a)
	rec      *turnframe.Recovery
	disp     *turnframe.Dispatcher
	platform *platform // the channel's log; nil when envPlatform is unset
	out      *observedOutbox

	http  *http.Client // domain calls: a fresh connection each
	spans *http.Client // handler spans

	slow    atomic.Bool // the current sweep's sends are slow
	holding atomic.Bool // the lock connection holds the write lock
	runs    int         // RunOnce calls made (main goroutine only)

	mu     sync.Mutex
	fired  map[entryKey]firedFault      // faults fired in handlers, checked after Execute
	called map[turnframe.AttemptID]bool // attempts whose handler made its domain call
	// appFaulted holds the commands whose app writes this process failed
	// on purpose already: a local command's failed runs are not counted
	// as attempts (its entry stays Pending), so the next run must succeed.
	appFaulted map[entryKey]bool
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

func runChild(role string, b Backend) error {
	ctx := context.Background()
	seed, _ := strconv.ParseUint(os.Getenv(envSeed), 10, 64)
	inc, _ := strconv.Atoi(os.Getenv(envInc))
	db := os.Getenv(envDB)
	c := &child{
		ctx: ctx, backend: b, seed: seed, inc: inc, worker: workerName(role, inc), role: role,
		remote: os.Getenv(envRemote), kind: os.Getenv(envKind), faults: os.Getenv(envFaults) == "1",
		http:  &http.Client{Transport: &http.Transport{DisableKeepAlives: true}},
		spans: &http.Client{Timeout: 10 * time.Second},
		fired: map[entryKey]firedFault{}, called: map[turnframe.AttemptID]bool{}, appFaulted: map[entryKey]bool{},
	}
	if c.kind == "" {
		c.kind = remoteDedup
	}
	var err error
	if c.store, err = b.Open(ctx, db, UseRuntime); err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer c.store.Close()
	if err := b.CreateAppTable(ctx, c.store); err != nil {
		return fmt.Errorf("create the app table: %w", err)
	}
	if c.dstore, err = openWhileBusy(ctx, b, db, UseDispatcher); err != nil {
		return fmt.Errorf("open the dispatcher's store: %w", err)
	}
	defer c.dstore.Close()
	if c.astore, err = b.Open(ctx, db, UseActor); err != nil {
		return fmt.Errorf("open the actor's store: %w", err)
	}
	defer c.astore.Close()
	if c.locker, err = b.Locker(ctx, db); err != nil {
		return fmt.Errorf("open the lock connection: %w", err)
	}
	if c.locker != nil {
		defer c.locker.Close()
	}

	remotes, err := c.remoteOptions()
	if err != nil {
		return err
	}
	opts := append([]turnframe.Option{
		turnframe.WithCommandTimeout(commandTimeout), turnframe.WithLeaseMargin(commandLeaseMargin),
		turnframe.WithMaxConflictRetries(8), // two processes commit to the same cases
	}, remotes...)
	c.rt = turnframe.New(c.store, opts...)
	c.actor = turnframe.New(c.astore, opts...)
	c.rec = turnframe.NewRecovery(c.store, remotes...)
	c.actorRec = turnframe.NewRecovery(c.astore, remotes...)
	c.out = &observedOutbox{Store: c.dstore, leases: map[turnframe.OutboxID]time.Time{}, settling: map[turnframe.OutboxID]bool{},
		cut: map[turnframe.OutboxID]bool{}}
	sender, err := c.sender()
	if err != nil {
		return err
	}
	margin := dispatchLeaseMargin
	if role == "dispatch" {
		// ThreeProcessesDispatchOneDatabase runs no expirer: its leases
		// only bound how long a settlement may wait for the file, which
		// three processes on a loaded machine can hold past 1.1 s.
		margin = 10 * time.Second
	}
	c.disp = turnframe.NewDispatcher(c.out, sender, turnframe.DispatchConfig{
		WorkerID: c.worker, BatchSize: 8, SendTimeout: sendTimeout, LeaseMargin: margin,
		InitialBackoff: 5 * time.Millisecond, MaxBackoff: 40 * time.Millisecond, MaxAttempts: 8,
	})
	if path := os.Getenv(envPlatform); path != "" && (role == "work" || role == "drain") {
		if c.platform, err = openPlatform(path); err != nil {
			return err
		}
		defer c.platform.Close()
	}
	if role != "expirer" {
		progress("open %s", c.worker)
	}
	switch role {
	case "work":
		return c.work()
	case "drain":
		return c.drain()
	case "dispatch":
		return c.dispatchAll()
	case "expirer":
		return c.expirer()
	}
	return fmt.Errorf("unknown role %q", role)
}

// remoteOptions declares what the remote can do, as the run's kind says
// (see remoteDedup), for the destination "remote" and every command that
// calls it. The commands that call no remote are declared local, and in
// every kind with a Verifier that answers "not happened": their only
// effects are written in the transaction that settles them, so an unknown
// one (a handler that said so) certainly did nothing.
func (c *child) remoteOptions() ([]turnframe.Option, error) {
	var r turnframe.Remote
	switch c.kind {
	case remoteDedup:
		r = turnframe.Remote{Deduplicates: 24 * time.Hour}
	case remoteAsked:
		r = turnframe.Remote{Verifier: turnframe.VerifierFunc(c.verify), VerifyBackoff: verifyBackoff}
	case remoteNeither:
		r = turnframe.Remote{}
	default:
		return nil, fmt.Errorf("%s=%q: want %s, %s or %s", envKind, c.kind, remoteDedup, remoteAsked, remoteNeither)
	}
	opts := []turnframe.Option{turnframe.WithDestination("remote", r)}
	for _, k := range remoteCallKinds {
		opts = append(opts, turnframe.WithCommand(k, r))
	}
	local := turnframe.Remote{Verifier: turnframe.VerifierFunc(verifyLocal)}
	for _, k := range localKinds {
		opts = append(opts, turnframe.WithCommand(k, local))
	}
	// And Execute runs them without a take (WithLocalCommand): a kill
	// while one runs leaves its entry Pending, run again by the next
	// process, and two processes may both run it, one commit landing.
	opts = append(opts, turnframe.WithLocalCommand(localKinds...))
	return opts, nil
}

// verifyLocal is the Verifier of the commands that call no remote.
func verifyLocal(context.Context, turnframe.Uncertain) turnframe.Verification {
	return turnframe.Verification{Found: turnframe.FoundNotHappened, Note: "a local command: nothing of it leaves the transaction that settles it"}
}

// verify is the asked kind's Verifier: it asks the remote's ledger whether
// the key's effect is there. A lookup that fails cannot tell.
func (c *child) verify(ctx context.Context, u turnframe.Uncertain) turnframe.Verification {
	key := u.RemoteKey
	if u.Subject.Kind == turnframe.SubjectJournal {
		key = commandRemoteKey(u.Subject.Account, u.Key)
	}
	ok, err := c.applied(ctx, key)
	switch {
	case err != nil:
		return turnframe.Verification{Found: turnframe.FoundUnsure, Note: err.Error()}
	case ok:
		return turnframe.Verification{Found: turnframe.FoundHappened, RemoteRef: "ref-" + key}
	}
	return turnframe.Verification{Found: turnframe.FoundNotHappened, Note: noteNotFound}
}

// noteNotFound is the note of the asked kind's "not happened": the audit
// trail keeps it on the resend it causes (a command's resend keeps no
// code: see figures.trail).
const noteNotFound = "the ledger has no such key"

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

// call makes a domain call to the remote under key, from attempt.
func (c *child) call(ctx context.Context, key string, attempt turnframe.AttemptID) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.remote+"/cmd", strings.NewReader(key))
	if err != nil {
		return err
	}
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("X-Worker", c.worker)
	req.Header.Set("X-Attempt", attempt.String())
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return nil
}

// applied asks the remote whether key's effect is there.
func (c *child) applied(ctx context.Context, key string) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.remote+"/applied?key="+url.QueryEscape(key), nil)
	if err != nil {
		return false, err
	}
	resp, err := c.http.Do(req)
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
// writes), which the remote compares with the other calls of the key. A
// local command's call holds no lease and says so (X-Local): two of them
// may overlap, and the audit checks one commit landed.
func (c *child) span(op string, call turnframe.Call) {
	lease := int64(0)
	local := slices.Contains(localKinds, call.Command.Name)
	if op == "begin" && !local {
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
	if local {
		req.Header.Set("X-Local", "1")
	}
	if resp, err := c.spans.Do(req); err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// firstCall reports whether attempt has not made its domain call yet, and
// records that it now does. Execute calls a handler again under the same
// attempt when its commit found the case moved: the call was made, and a
// remote that does not deduplicate would take a second one for a second
// effect.
func (c *child) firstCall(attempt turnframe.AttemptID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.called[attempt] {
		return false
	}
	c.called[attempt] = true
	return true
}

func (c *child) handle(ctx context.Context, call turnframe.Call) turnframe.Outcome {
	c.span("begin", call)
	defer c.span("end", call)
	kind := call.Command.Name
	if kind == kindFlaky && call.Attempts <= 1 {
		kind = "" // the request never leaves: the remote cannot have it
	}
	var callErr error
	if callsRemote(kind) && c.firstCall(call.Attempt) {
		callErr = c.call(ctx, commandRemoteKey(call.Account, call.Command.Key), call.Attempt)
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
		if call.Attempts <= 1 {
			<-ctx.Done() // the remote does not answer in time: outcome unknown
			return turnframe.Unknown("")
		}
		if callErr != nil {
			return turnframe.Unknown("")
		}
		return turnframe.Commit(ev)
	case "":
		return turnframe.Unknown("") // a flaky command's first attempt
	}
	return turnframe.Reject("unknown_kind")
}

// handler is the children's handler: handle, its commits writing the
// app's row in the same transaction (withAppRow).
func (c *child) handler() turnframe.Handler { return turnframe.HandlerFunc(c.withAppRow) }

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
			if errors.Is(err, errAppFault) { // the app's writes failed: nothing was written (app.go)
				seen("app_error", "%v", turn)
				return true, nil // its attempt's lease ends, and a later sweep resumes it
			}
			if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
				// A local command's handler outlived the command timeout (a
				// loaded machine, the race detector): its entry stays
				// Pending, nothing of it written, and a later sweep runs it.
				seen("local_timeout", "%v", turn)
				return true, nil
			}
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
		pending := slices.ContainsFunc(rep.Results, func(r turnframe.CommandResult) bool { return r.Status.IsPending() })
		switch {
		case rep.Phase.IsTerminal():
			return false, nil // abandoned while a command ran (a fault), or delivered
		case rep.Phase != turnframe.PhaseCommitted && pending:
			continue // an entry went back to pending meanwhile (a resend): run it
		}
		// Committed; or nothing pending, the last entry having been
		// declared unknown (a dead attempt) rather than run: an unknown
		// entry does not hold the answer back.
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
		// Pending again: the policy or the actor resent one of its commands. Run it.
	}
	return true, nil
}

// The recovery handler: what a child does with every unfinished turn
// Recover hands it. A turn another process holds is deferred. Unknown
// outcomes are not the handler's: Recover resolves them by policy.
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

// holders lists the worker holding each claimed row, so that expiries can
// be named by the worker that lost them.
func (c *child) holders() (map[turnframe.OutboxID]string, error) {
	held, err := c.store.ListOutbox(c.ctx, turnframe.OutboxFilter{Status: turnframe.OutboxDispatching, Limit: turnframe.MaxLimit})
	if err != nil {
		return nil, err
	}
	holder := make(map[turnframe.OutboxID]string, len(held))
	for _, r := range held {
		holder[r.ID] = r.ClaimedBy
	}
	return holder, nil
}

// reportExpired names each expired row with the worker that held it
// ("R id worker expirer"), so the parent can check that no live worker
// lost a row.
func (c *child) reportExpired(ids []turnframe.OutboxID, holder map[turnframe.OutboxID]string) {
	for _, id := range ids {
		w := holder[id]
		if w == "" {
			w = "?"
		}
		fmt.Fprintf(os.Stdout, "R %s %s %s\n", id, w, c.worker)
	}
}

// expire expires the claims whose lease ended (store.ExpireClaims: each
// becomes OutcomeUnknown, for the policy) and reports them.
func (c *child) expire() (int, error) {
	holder, err := c.holders()
	if err != nil {
		return 0, err
	}
	ids, err := c.dstore.ExpireClaims(c.ctx, time.Now())
	if errors.Is(err, turnframe.ErrBusy) {
		tally("busy_expire", 1) // the database is held: the next call expires them
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	c.reportExpired(ids, holder)
	return len(ids), nil
}

// recover runs Recovery.Recover over scope: it expires ended claims,
// resolves every unknown by the policy of the run's kind, sweeps the
// unfinished turns in scope through the handler, and lists what needs a
// person. Turns another process holds are deferred and counted, not
// failed: a later Recover takes them once their leases ended. It returns
// when the policy wants to look again (a backoff between lookups), zero
// when never.
func (c *child) recover(scope turnframe.RecoveryScope) (next time.Time, err error) {
	holder, err := c.holders()
	if err != nil {
		return next, fmt.Errorf("list claims: %w", err)
	}
	rep, err := c.rec.Recover(c.ctx, scope, c)
	c.reportExpired(rep.Expired, holder)
	if err != nil {
		return next, err
	}
	for _, p := range rep.Policy {
		switch {
		case p.Err == nil:
		case errors.Is(p.Err, turnframe.ErrConflict):
			tally("policy_conflict", 1) // another process settled it first, or it moved meanwhile
		default:
			return next, fmt.Errorf("policy on %v %s (%v): %w", p.Uncertain.Subject.Kind, p.Uncertain.Subject.Ref, p.Outcome, p.Err)
		}
		if (p.Outcome == turnframe.PolicyWaiting || p.Outcome == turnframe.PolicyUnsure) && (next.IsZero() || p.NextAt.Before(next)) {
			next = p.NextAt
		}
	}
	deferred := 0
	for _, f := range rep.Turns.Failures {
		if errors.Is(f.Err, errDeferred) {
			deferred++
			continue
		}
		return next, fmt.Errorf("recover: turn %v (%v): %w", f.Turn, f.Action, f.Err)
	}
	tally("swept", rep.Turns.Turns)
	tally("sweep_deferred", deferred)
	progress("recovered: expired %d; policy %d (resent %d, completed %d, rejected %d, escalated %d, unsure %d, waiting %d); turns %d, deferred %d; needs intervention %d",
		len(rep.Expired), len(rep.Policy), rep.Count(turnframe.PolicyResent), rep.Count(turnframe.PolicyCompleted), rep.Count(turnframe.PolicyRejected),
		rep.Count(turnframe.PolicyEscalated), rep.Count(turnframe.PolicyUnsure), rep.Count(turnframe.PolicyWaiting),
		rep.Turns.Turns, deferred, len(rep.NeedsIntervention))
	return next, nil
}

// dispatchOnce runs one dispatch sweep, slow now and then (a fault). A
// claim refused because the database is busy is no error: the next sweep
// claims. A row left unsettled in a live process is: its settlement was
// refused for good (the claim was lost, so a live sweep's row was
// expired) — the one thing leases are there to prevent.
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
//
// Every turn is a message the platform delivers (ReceiveMessage, under an
// id of its text), and redelivers at a drawn moment: at once, before or
// after the turn ran, a few turns later, or never by this child. At
// start-up, before recovering, the platform redelivers a drawn share of the
// log's messages no child redelivered yet: its predecessor's, and the live
// sibling's, whose own redeliveries may race with these.
func (c *child) work() error {
	if err := c.redeliverLogged(whenStartup, startupSharePercent, true); err != nil {
		return err
	}
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
	var later []laterRedelivery
	for i := 0; limit == 0 || i < limit; i++ {
		// Both accounts use the same texts, hence the same command keys:
		// keys are per tenant, and so must their effects be.
		account := accounts[i%2]
		text := fmt.Sprintf("t%d-%d", c.inc, i/2)
		m := message{worker: c.worker, account: account, conversation: conv, id: messageID(text), text: text}
		if err := c.workTurn(m, i, &later); err != nil {
			return err
		}
		var err error
		if later, err = c.redeliverDue(later, i); err != nil {
			return err
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

// workTurn delivers m, the child's turn i, runs its turn, and redelivers it
// when the draw says: at once, before or after the turn ran, or later
// (appended to later).
func (c *child) workTurn(m message, i int, later *[]laterRedelivery) error {
	turn, redelivered, err := c.deliver(m)
	if err != nil || redelivered {
		return err
	}
	n := draw(c.seed, "redeliver", c.inc, i)
	if n < redeliverBeforePercent {
		if err := c.redeliver(m, whenNow, true); err != nil {
			return err
		}
	}
	if err := c.play(m.account, turn, m.text); err != nil {
		return err
	}
	switch n -= redeliverBeforePercent; {
	case n < 0:
	case n < redeliverAfterPercent:
		return c.redeliver(m, whenNow, true)
	case n < redeliverAfterPercent+redeliverLaterPercent:
		due := i + 1 + draw(c.seed, "redeliver_later", c.inc, i)%redeliverLaterMaxTurns
		*later = append(*later, laterRedelivery{msg: m, due: due})
	}
	return nil
}

// drain finishes everything, beside another drain doing the same: recover
// (the policy resolves the unknowns), dispatch until nothing is due, and
// again, until nothing is open — waiting for leases to end, backoffs to
// come due and the policy's lookups to be due again, never longer than the
// earliest of them (at most drainPollMax), and failing after drainDeadline.
// What needs a person (NeedsIntervention), and what it holds back, is not
// open: nothing will move it but a person.
//
// First the platform redelivers every message of the log no child
// redelivered yet (both drains do, at once, so their deliveries of one id
// race); a redelivery that begins its turn leaves it to the recover loop.
func (c *child) drain() error {
	if err := c.redeliverLogged(whenDrain, 100, false); err != nil {
		return err
	}
	deadline := time.Now().Add(drainDeadline)
	for round := 0; ; round++ {
		next, err := c.recover(turnframe.RecoveryScope{})
		if err != nil {
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
		if !next.IsZero() && next.Before(wake) {
			wake = next
		}
		if floor := time.Now().Add(2 * time.Millisecond); wake.Before(floor) {
			wake = floor
		}
		t := time.NewTimer(time.Until(wake))
		<-t.C
	}
}

// parkedTurn reports whether a turn's entries, in phase at now, leave it
// to a person: it holds a NeedsIntervention entry, and nothing the policy
// or a worker will still move — no OutcomeUnknown entry, no Executing one
// under a live lease, none stranded on an abandoned turn (Recover resolves
// those). Recover decides such a turn ReconcileExternal for as long as the
// entry needs intervention, so its other pending entries are not resumed,
// an attempt that died on it is neither resumed nor declared unknown, and
// a missing answer is not regenerated: they wait for the person too.
func parkedTurn(entries []turnframe.JournalEntry, phase turnframe.TurnPhase, now time.Time) bool {
	escalated := false
	for _, e := range entries {
		switch {
		case e.Status == turnframe.JournalNeedsIntervention:
			escalated = true
		case e.Status == turnframe.JournalOutcomeUnknown:
			return false
		case e.Status == turnframe.JournalExecuting && (e.LeaseUntil.After(now) || phase == turnframe.PhaseAbandoned):
			return false
		}
	}
	return escalated
}

// entryStatuses names the status (and, executing, the lease) of each
// entry, for an error message.
func entryStatuses(entries []turnframe.JournalEntry, now time.Time) string {
	var parts []string
	for _, e := range entries {
		p := string(e.Key) + " " + e.Name + " " + e.Status.String()
		if e.Status == turnframe.JournalExecuting {
			p += fmt.Sprintf(" (lease ended %v ago)", now.Sub(e.LeaseUntil).Round(time.Millisecond))
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ", ")
}

// heldKeys returns the order keys (account and key) that a
// NeedsIntervention row holds: the rows after it in its key wait for a
// person.
func heldKeys(rows []turnframe.OutboxRecord) map[string]bool {
	held := map[string]bool{}
	for _, r := range rows {
		if r.Status == turnframe.OutboxNeedsIntervention && r.OrderKey != "" {
			held[orderKeyOf(r)] = true
		}
	}
	return held
}

func orderKeyOf(r turnframe.OutboxRecord) string { return string(r.Account) + "\x00" + r.OrderKey }

// openWork says what is still unfinished ("" for nothing), and when to look
// again: the earliest lease end or due time of an open row, or soon. A turn
// parked behind an escalation and a row held behind one are not open.
func (c *child) openWork() (string, time.Time, error) {
	now := time.Now()
	wake := now.Add(drainPollMax)
	turns, err := c.store.ListUnfinishedTurns(c.ctx, turnframe.RecoveryScope{}, turnframe.MaxLimit)
	if err != nil {
		return "", wake, err
	}
	var open []string
	openTurns, parked := 0, 0
	var first string
	for _, m := range turns {
		entries, err := c.store.ForTurn(c.ctx, m.Account, m.Turn)
		if err != nil {
			return "", wake, err
		}
		if parkedTurn(entries, m.Phase, now) {
			parked++
			continue
		}
		if openTurns == 0 {
			first = fmt.Sprintf("%v, %v: %s", m.Turn, m.Phase, entryStatuses(entries, now))
		}
		openTurns++
	}
	if openTurns > 0 {
		open = append(open, fmt.Sprintf("%d unfinished turns (first %s; %d more parked behind an escalation)", openTurns, first, parked))
	}
	escalated, err := c.store.ListOutbox(c.ctx, turnframe.OutboxFilter{Status: turnframe.OutboxNeedsIntervention, Limit: turnframe.MaxLimit})
	if err != nil {
		return "", wake, err
	}
	held := heldKeys(escalated)
	for _, st := range []turnframe.OutboxStatus{turnframe.OutboxPending, turnframe.OutboxDispatching, turnframe.OutboxOutcomeUnknown} {
		rows, err := c.store.ListOutbox(c.ctx, turnframe.OutboxFilter{Status: st, Limit: turnframe.MaxLimit})
		if err != nil {
			return "", wake, err
		}
		n := 0
		for _, r := range rows {
			if st == turnframe.OutboxPending && r.OrderKey != "" && held[orderKeyOf(r)] {
				continue // behind an escalated row of its order key
			}
			n++
			at := r.DueAt
			if st == turnframe.OutboxDispatching {
				at = r.LeaseUntil
			}
			if !at.IsZero() && at.Before(wake) {
				wake = at
			}
		}
		if n > 0 {
			open = append(open, fmt.Sprintf("%d rows %v", n, st))
		}
	}
	if floor := now.Add(2 * time.Millisecond); wake.Before(floor) {
		wake = floor
	}
	return strings.Join(open, ", "), wake, nil
}

// dispatchAll: dispatch until nothing is due, several times in a row (the
// other processes may still hold rows), never expiring a claim.
func (c *child) dispatchAll() error {
	empty := 0
	for empty < 3 {
		rep, err := c.disp.RunOnce(c.ctx, time.Now())
		if errors.Is(err, turnframe.ErrBusy) {
			continue // another process holds the database: claim again
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

// expirer calls store.ExpireClaims again and again, beside the workers,
// until its stdin closes: a live sweep's rows must never be expired, and a
// dead worker's are expired (to OutcomeUnknown, for the workers' policy)
// once their leases ended.
func (c *child) expirer() error {
	stop := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(stop)
	}()
	tick := time.NewTicker(expireEvery)
	defer tick.Stop()
	calls := 0
	for {
		select {
		case <-stop:
			tally("expire_calls", calls)
			return nil
		case <-tick.C:
			calls++
			if _, err := c.expire(); err != nil {
				return err
			}
		}
	}
}
