package turnframe

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"time"
)

// Dispatcher claims due outbox rows, sends each through a Sender and settles
// each with what the send said. It starts nothing on its own: the
// application calls RunOnce from its own loop, scheduler or cron job, and can
// stop, pause or scale that loop as it likes — or calls Run, the loop the
// library offers.
//
// Claims are the store's: two dispatchers (in one process or two, on one
// SQLite file) claim disjoint rows, and a Dispatcher sends exactly what its
// claim returned. It never invents an idempotency key and never sends a row
// whose outcome is unknown (I15).
//
// A Dispatcher is safe for concurrent use: concurrent RunOnce calls claim
// disjoint rows, as two dispatchers do, and share its DestinationLimits. Give each process its own WorkerID,
// so an operator can tell whose claim a row is under.
type Dispatcher struct {
	store  OutboxStore
	sender Sender
	cfg    DispatchConfig
	obs    observer
	clock  settings // for WithClock: the time late evidence is stamped with, and Run's now
	limits destLimits
	live   *liveSweeps // the sweeps running now, whose leases Run's release brings up to the clock first
}

// NewDispatcher returns a dispatcher over store, sending through sender with
// cfg (zero fields take their defaults). It honours WithObserver, WithLogger,
// WithClock (Run's now, the clock a sweep's lease extensions and send
// latencies are read on, the time late answers are recorded at) and
// WithDestination (the policy Run applies to unknown rows, and the window
// within which a resend of the policy may still be sent: declare each
// destination to the Dispatcher as to Recovery), and ignores the other
// options.
//
// It panics on programmer errors: a nil store or sender, a cfg.WorkerID
// CheckWorker refuses (empty, over 193 bytes, or not printable as itself),
// or a BatchSize over MaxLimit.
func NewDispatcher(store OutboxStore, sender Sender, cfg DispatchConfig, opts ...Option) *Dispatcher {
	if isNil(store) { // a nil pointer behind it too: Open failed
		panic("turnframe: NewDispatcher with a nil store")
	}
	if isNil(sender) {
		panic("turnframe: NewDispatcher with a nil sender")
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		panic("turnframe: NewDispatcher: " + err.Error())
	}
	s := newSettings(opts)
	return &Dispatcher{store: store, sender: sender, cfg: cfg, obs: s.observe(), clock: s, limits: newDestLimits(cfg.DestinationLimits),
		live: &liveSweeps{}}
}

// Config returns the configuration in force, defaults filled in. Its
// DestinationLimits is a copy.
func (d *Dispatcher) Config() DispatchConfig {
	c := d.cfg
	c.DestinationLimits = maps.Clone(c.DestinationLimits)
	return c
}

// rowFate is what became of one claimed row. The zero value is
// fateUnsettled, so a row nobody settled is never reported as settled.
type rowFate uint8

const (
	fateUnsettled rowFate = iota
	fateCompleted
	fateRetried
	fateFailed
	fateUnknown
)

// RunOnce claims the rows due at now (at most BatchSize, under WorkerID, each
// leased for Config().Lease()), sends each and settles each, holding its
// claim, at now:
//
//   - DispatchCompleted → Completed, with the remote's reference;
//   - DispatchRetryable → Pending, due at now + the larger of BackoffFor(the
//     attempts of its current budget) and the sender's RetryAfter, capped
//     at MaxBackoff (a RetryAfter that decides the wait counts from the
//     answer: the send's whole seconds by the dispatcher's clock are
//     added); or Failed with CodeAttemptsExhausted when the row
//     has had MaxAttempts attempts since it was enqueued or last requeued;
//   - DispatchPermanent → Failed, with the sender's code;
//   - DispatchUnknown, a send that answered after SendTimeout (or not at
//     all), or a sender that panicked → OutcomeUnknown. Such a row is never
//     sent again by a dispatcher (I15).
//
// A row the policy resent to a destination declared to deduplicate
// (CodeResent), whose earlier send's outcome is still in doubt, is not
// sent once the remote no longer remembers its key (Remote.Deduplicates
// passed since the row was created), however its claim came so late, nor
// once the destination is declared a remote that does not deduplicate (a
// restart changed its declaration since the policy resent it): it is
// settled OutcomeUnknown again at once, CodeKeyForgotten, recorded as the
// policy's (ActorPolicy), without calling the sender, and the next Recover
// escalates it. Its history, read only for a row past that window and sent
// before, tells whether it is such a resend; a history that cannot be read
// puts the row back unsent (CodeNotSent), due after the backoff a retryable
// answer would earn, never at once: Run would claim it again at once and
// read the failing store again, in a loop, for as long as it fails.
//
// The sender's code is kept as the row's last code in every case
// (CodeSendTimeout, CodeSenderPanic for the two the dispatcher makes).
//
// Each send runs on a goroutine of its own under SendTimeout; an answer it
// gives after that deadline is discarded, never read (see Sender). With
// Concurrency above 1 that many rows of the batch are sent at once, and no
// more to one destination than DestinationLimits allows (counting this
// Dispatcher's other sends). While
// RunOnce runs, it extends the lease of every row it has not settled yet, in
// good time, so no release takes a row from a live sweep however long its
// sends take. Sends hand their settlements to one settler, which writes all
// that are ready in one store transaction (group commit) and never waits for
// more, so a lone settlement is written at once; each keeps its own result.
// A settlement the store refuses as busy (ErrBusy) is tried again, with
// backoff, until it lands or the store is closed — even after ctx ended,
// until the rows' leases end: a send whose outcome is known is never sent
// again because one write failed. A row whose send had not started when ctx
// ended is not sent: it is put back Pending, due at now, with CodeNotSent.
//
// RunOnce returns when every claimed row is settled or reported Unsettled,
// with nothing of its own left running — except a Sender that ignores its
// context past its deadline (see Sender). The report lists each row once, in
// claim order. A settlement the store refuses for good (ErrClaimLost: the
// lease ended and another worker took the row; or the store closed) is not
// an error: the row is in report.Unsettled, and its send's outcome is
// logged at error level so an operator can settle it. The error is for a
// claim that could not be made; it wraps the store's error, and then nothing
// was claimed.
func (d *Dispatcher) RunOnce(ctx context.Context, now time.Time) (DispatchReport, error) {
	sw, err := d.claimLive(ctx, ctx, ctx, d.cfg.BatchSize, func(time.Time) time.Time { return now })
	if err != nil || sw == nil {
		return DispatchReport{}, err
	}
	sw.run()
	claims := sw.claims

	var report DispatchReport
	for i, c := range claims {
		switch sw.fates[i] {
		case fateCompleted:
			report.Completed = append(report.Completed, c.ID)
		case fateRetried:
			report.Retried = append(report.Retried, c.ID)
		case fateFailed:
			report.Failed = append(report.Failed, c.ID)
		case fateUnknown:
			report.Unknown = append(report.Unknown, c.ID)
		default:
			report.Unsettled = append(report.Unsettled, c.ID)
		}
	}
	return report, nil
}

// claimLive claims at most limit due rows and returns their sweep, in the
// live set before Run's release can read its clock (liveSweeps.gate), or
// nil if no row was due. The Dispatcher's clock is read first, as start:
// the leases run from that reading, however long the claim takes; at
// gives the claim's time from it. The sweep sends under send, starts no
// send once stop ended, and must be run: its run leaves the live set.
func (d *Dispatcher) claimLive(ctx, send, stop context.Context, limit int, at func(start time.Time) time.Time) (*sweep, error) {
	if err := d.live.gate.share(ctx); err != nil {
		return nil, fmt.Errorf("claim due outbox rows: %w", err)
	}
	defer d.live.gate.unshare()
	start := d.clock.clock()
	now := at(start)
	claims, err := d.claimDue(ctx, now, limit)
	if err != nil || len(claims) == 0 {
		return nil, err
	}
	sw := newSweep(send, stop, d, claims, now, start)
	d.live.add(sw)
	return sw, nil
}

// claimDue claims at most limit rows due at now, under WorkerID, leased
// for Config().Lease(), and counts each claimed.
func (d *Dispatcher) claimDue(ctx context.Context, now time.Time, limit int) ([]Claim, error) {
	claims, err := d.store.ClaimDue(ctx, now, limit, d.cfg.WorkerID, d.cfg.Lease())
	if err != nil {
		return nil, fmt.Errorf("claim due outbox rows: %w", err)
	}
	for _, c := range claims {
		d.obs.count(SignalOutboxClaimed, Labels{Destination: c.Destination})
	}
	return claims, nil
}

// rowAttrs are the log attributes naming one claimed row.
func rowAttrs(c Claim) []slog.Attr {
	return []slog.Attr{
		slog.String("outbox_id", c.ID.String()),
		slog.String("destination", c.Destination),
		slog.Int("attempt", c.Attempts),
	}
}

// send calls the sender through callWithin under SendTimeout. A send that
// has not answered by then (or answered only after), or that panicked, is
// DispatchUnknown; so is a kind out of range.
// A send that stop ended before it started is not made: sent is false.
func (d *Dispatcher) send(ctx, stop context.Context, c Claim) (out Dispatched, sent bool) {
	entry := c.OutboxEntry
	entry.Payload = bytes.Clone(entry.Payload) // a sender that outlives us keeps its own copy
	start := d.clock.clock()
	late := func(b bounded[Dispatched]) {
		note := fmt.Sprintf("the send answered after its deadline: %v %s", b.value.Kind, b.value.Code)
		if b.end == callPanicked {
			note = fmt.Sprintf("the send panicked after its deadline: %v", b.panic)
		}
		d.recordLate(ctx, c, b.value.RemoteRef, note)
	}
	r := callUnlessStopped(ctx, stop, d.cfg.SendTimeout, func(sctx context.Context) Dispatched { return d.sender.Send(sctx, entry) }, late)
	if r.notStarted {
		return Dispatched{}, false
	}
	elapsed := d.clock.clock().Sub(start)
	out = r.value
	if kept := SenderCode(out.Code); r.end == callAnswered && kept != out.Code {
		d.obs.logf(ctx, slog.LevelWarn, "turnframe: sender code replaced: it is the library's (it begins \"turnframe.\") or not one a store keeps",
			append(rowAttrs(c), slog.String("code", keepable(out.Code, MaxNameLen)), slog.Int("code_bytes", len(out.Code)),
				slog.String("replacement", kept))...)
		out.Code = kept
	}
	switch r.end {
	case callTimedOut:
		out = Dispatched{Kind: DispatchUnknown, Code: CodeSendTimeout}
		d.obs.logf(ctx, slog.LevelWarn, "turnframe: send did not answer in time; the outcome is unknown, not a failure",
			append(rowAttrs(c), slog.String("cause", r.cause.Error()))...)
	case callPanicked:
		out = Dispatched{Kind: DispatchUnknown, Code: CodeSenderPanic}
		d.obs.logf(ctx, slog.LevelError, "turnframe: sender panicked; the outcome is unknown",
			append(rowAttrs(c), slog.Any("panic", r.panic), slog.String("stack", string(r.stack)))...)
	}
	if out.Kind > DispatchPermanent {
		d.obs.logf(ctx, slog.LevelError, "turnframe: sender answered a kind out of range; the outcome is unknown",
			append(rowAttrs(c), slog.Int("kind", int(out.Kind)))...)
		out.Kind = DispatchUnknown
	}
	d.obs.timed(SignalExternalLatency, Labels{Destination: c.Destination, Outcome: out.Kind.String()}, elapsed)
	d.obs.logf(ctx, slog.LevelDebug, "turnframe: outbox row sent",
		append(rowAttrs(c), slog.String("outcome", out.Kind.String()), slog.String("code", out.Code),
			slog.Duration("elapsed", elapsed))...)
	return out, true
}

// recordLate records a late answer about c's row as evidence, when the
// store keeps history (every Store does).
func (d *Dispatcher) recordLate(ctx context.Context, c Claim, remoteRef, note string) {
	if hs, ok := d.store.(HistoryStore); ok {
		note += fmt.Sprintf(" (attempt %d, worker %s)", c.Attempts, c.Worker)
		recordLateAnswer(ctx, hs, d.obs, d.clock.now(), OutboxSubject(c.Account, c.ID), WorkerActor(c.Worker), remoteRef, note)
	}
}

// settlementFor turns a send's outcome into the settlement of its row, at
// now, the claim's time; answered is when the answer came, by the sweep's
// clock (retryAt). A reference no
// store would keep is dropped (and logged), so the row still
// settles as the sender classified it: a refused settlement would leave the
// row to be released and sent again.
func (d *Dispatcher) settlementFor(ctx context.Context, c Claim, out Dispatched, now, answered time.Time) (OutboxSettlement, rowFate) {
	code, ref := out.Code, out.RemoteRef // send kept the code (SenderCode)
	if checkString("remote_ref", ref, 0, MaxRemoteRefLen) != nil {
		d.obs.logf(ctx, slog.LevelWarn, "turnframe: remote reference dropped: it is not one a store keeps",
			append(rowAttrs(c), slog.Int("remote_ref_bytes", len(ref)))...)
		ref = ""
	}
	s := OutboxSettlement{Claim: c, Code: code, Now: now}
	switch out.Kind {
	case DispatchCompleted:
		s.To, s.RemoteRef = OutboxCompleted, ref
		return s, fateCompleted
	case DispatchRetryable:
		spent := c.Attempts - c.AttemptBase
		if spent >= d.cfg.MaxAttempts {
			d.obs.logf(ctx, slog.LevelWarn, "turnframe: outbox row failed: its attempts are spent",
				append(rowAttrs(c), slog.String("code", code))...)
			s.To, s.Code = OutboxFailed, CodeAttemptsExhausted
			return s, fateFailed
		}
		s.To, s.RetryAt = OutboxPending, retryAt(now, answered, d.cfg.BackoffFor(spent), out.RetryAfter, d.cfg.MaxBackoff)
		return s, fateRetried
	case DispatchPermanent:
		s.To = OutboxFailed
		return s, fateFailed
	default:
		s.To, s.RemoteRef = OutboxOutcomeUnknown, ref
		// It became unknown when the send ended, not at the claim: the
		// policy's SettleDelay counts from then. Not cut to the whole
		// second: a date before the end would shorten the delay by up to
		// a second (to the microsecond a store keeps, never earlier).
		if answered.After(now) {
			s.Now = now.Add(answered.Sub(now).Truncate(time.Microsecond))
		}
		return s, fateUnknown
	}
}

// retryAt returns when a row the remote answered retryable is due again:
// after the larger of backoff and the remote's retryAfter, at most
// maxBackoff, counted from now, the claim's time — and never before
// retryAfter (at most maxBackoff) counted from the answer, which came
// answered − now later, cut to whole seconds (Retry-After's own unit): the
// remote asked to be left alone from its answer on, and a slow answer must
// not shorten that, whether or not the backoff was the longer wait, while a
// send's usual milliseconds leave the due time exactly where now puts it.
// It is at most MaxTime, the latest time a store keeps: a claim made near
// it must still settle.
func retryAt(now, answered time.Time, backoff, retryAfter, maxBackoff time.Duration) time.Time {
	due := now.Add(min(max(backoff, retryAfter), maxBackoff))
	if retryAfter > 0 && answered.After(now) {
		asked := now.Add(answered.Sub(now).Truncate(time.Second)).Add(min(retryAfter, maxBackoff))
		if asked.After(due) {
			due = asked
		}
	}
	if due.After(MaxTime) {
		due = MaxTime
	}
	return due
}
