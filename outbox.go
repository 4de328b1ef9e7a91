package turnframe

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Dispatcher claims due outbox rows, sends each through a Sender and settles
// each with what the send said. It starts nothing on its own: the
// application calls RunOnce from its own loop, scheduler or cron job, and can
// stop, pause or scale that loop as it likes.
//
// Claims are the store's: two dispatchers (in one process or two, on one
// SQLite file) claim disjoint rows, and a Dispatcher sends exactly what its
// claim returned. It never invents an idempotency key and never sends a row
// whose outcome is unknown (I15).
//
// A Dispatcher is safe for concurrent use: concurrent RunOnce calls claim
// disjoint rows, as two dispatchers do. Give each process its own WorkerID,
// so an operator can tell whose claim a row is under.
type Dispatcher struct {
	store  OutboxStore
	sender Sender
	cfg    DispatchConfig
	obs    observer
}

// NewDispatcher returns a dispatcher over store, sending through sender with
// cfg (zero fields take their defaults). It honours WithObserver and
// WithLogger and ignores the other options.
//
// It panics on programmer errors: a nil store or sender, an empty or
// over-long cfg.WorkerID, or a BatchSize over MaxLimit.
func NewDispatcher(store OutboxStore, sender Sender, cfg DispatchConfig, opts ...Option) *Dispatcher {
	if store == nil {
		panic("turnframe: NewDispatcher with a nil store")
	}
	if sender == nil {
		panic("turnframe: NewDispatcher with a nil sender")
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		panic("turnframe: NewDispatcher: " + err.Error())
	}
	s := newSettings(opts)
	return &Dispatcher{store: store, sender: sender, cfg: cfg, obs: s.observe()}
}

// Config returns the configuration in force, defaults filled in.
func (d *Dispatcher) Config() DispatchConfig { return d.cfg }

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

// queuedSettlement is a sent row's settlement, waiting for the settler.
type queuedSettlement struct {
	idx        int // the row's place in the claim
	settlement OutboxSettlement
	fate       rowFate // what the row becomes once the settlement is written
	out        Dispatched
}

// RunOnce claims the rows due at now (at most BatchSize, under WorkerID),
// sends each and settles each, holding its claim, at now:
//
//   - DispatchCompleted → Completed, with the remote's reference;
//   - DispatchRetryable → Pending, due at now + BackoffFor(attempts); or
//     Failed with CodeAttemptsExhausted when the row has had MaxAttempts;
//   - DispatchPermanent → Failed, with the sender's code;
//   - DispatchUnknown, a send past SendTimeout, or a sender that panicked →
//     OutcomeUnknown. Such a row is never sent again by a dispatcher (I15).
//
// Each send runs on a goroutine of its own under SendTimeout; with
// Concurrency above 1 that many rows of the batch are sent at once. Sends
// hand their settlements to one settler, which writes all that are ready in
// one store transaction (group commit) and never waits for more, so a lone
// settlement is written at once; each keeps its own result. Settlements are
// written even if ctx ends meanwhile: a send that happened must be recorded.
// A row whose send had not started when ctx ended is not sent: it is put
// back Pending, due at now, with CodeNotSent.
//
// RunOnce returns when every claimed row is settled or reported Unsettled,
// with nothing of its own left running — except a Sender that ignores its
// context past its deadline (see Sender). The report lists each row once, in
// claim order. A settlement the store refuses (ErrClaimLost: the claim
// expired and another worker took the row) is not an error: the row is in
// report.Unsettled. The error is for a claim that could not be made; it
// wraps the store's error, and then nothing was claimed.
func (d *Dispatcher) RunOnce(ctx context.Context, now time.Time) (DispatchReport, error) {
	claims, err := d.store.ClaimDue(ctx, now, d.cfg.BatchSize, d.cfg.WorkerID)
	if err != nil {
		return DispatchReport{}, fmt.Errorf("claim due outbox rows: %w", err)
	}
	if len(claims) == 0 {
		return DispatchReport{}, nil
	}
	for _, c := range claims {
		d.obs.count(SignalOutboxClaimed, Labels{Destination: c.Destination})
	}

	fates := make([]rowFate, len(claims)) // written by the settler only
	queue := make(chan queuedSettlement, len(claims))
	settlerDone := make(chan struct{})
	go func() {
		defer close(settlerDone)
		d.settleQueued(context.WithoutCancel(ctx), queue, claims, fates)
	}()

	next := make(chan int, len(claims))
	for i := range claims {
		next <- i
	}
	close(next)
	var senders sync.WaitGroup
	for range min(d.cfg.Concurrency, len(claims)) {
		senders.Go(func() {
			for i := range next {
				queue <- d.dispatchRow(ctx, i, claims[i], now)
			}
		})
	}
	senders.Wait()
	close(queue)
	<-settlerDone

	var report DispatchReport
	for i, c := range claims {
		switch fates[i] {
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

// rowAttrs are the log attributes naming one claimed row.
func rowAttrs(c Claim) []slog.Attr {
	return []slog.Attr{
		slog.String("outbox_id", c.ID.String()),
		slog.String("destination", c.Destination),
		slog.Int("attempt", c.Attempts),
	}
}

// dispatchRow sends one claimed row, unless ctx already ended, and returns
// the settlement its outcome calls for.
func (d *Dispatcher) dispatchRow(ctx context.Context, idx int, c Claim, now time.Time) queuedSettlement {
	if ctx.Err() != nil {
		d.obs.logf(ctx, slog.LevelInfo, "turnframe: outbox row not sent: the sweep was cancelled",
			append(rowAttrs(c), slog.String("code", CodeNotSent))...)
		return queuedSettlement{
			idx:        idx,
			settlement: OutboxSettlement{Claim: c, To: OutboxPending, Code: CodeNotSent, RetryAt: now, Now: now},
			fate:       fateRetried,
			out:        Dispatched{Kind: DispatchRetryable, Code: CodeNotSent},
		}
	}
	out := d.send(ctx, c)
	s, fate := d.settlementFor(ctx, c, out, now)
	return queuedSettlement{idx: idx, settlement: s, fate: fate, out: out}
}

// send calls the sender through callWithin under SendTimeout. A send that
// has not answered by then, or that panicked, is DispatchUnknown; so is a
// kind out of range.
func (d *Dispatcher) send(ctx context.Context, c Claim) Dispatched {
	entry := c.OutboxEntry
	entry.Payload = bytes.Clone(entry.Payload) // a sender that outlives us keeps its own copy
	start := time.Now()
	r := callWithin(ctx, d.cfg.SendTimeout, func(sctx context.Context) Dispatched { return d.sender.Send(sctx, entry) })
	elapsed := time.Since(start)
	out := r.value
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
	return out
}

// settlementFor turns a send's outcome into the settlement of its row. A code
// or reference no store would keep is replaced or dropped (and logged), so
// the row still settles as the sender classified it: a refused settlement
// would leave the row to be released and sent again.
func (d *Dispatcher) settlementFor(ctx context.Context, c Claim, out Dispatched, now time.Time) (OutboxSettlement, rowFate) {
	code, ref := out.Code, out.RemoteRef
	if CheckCode("code", code) != nil {
		d.obs.logf(ctx, slog.LevelWarn, "turnframe: sender code replaced: it is not a code a store keeps",
			append(rowAttrs(c), slog.String("code", code), slog.String("replacement", CodeInvalidCode))...)
		code = CodeInvalidCode
	}
	if checkString("remote_ref", ref, 0, MaxRemoteRefLen) != nil {
		d.obs.logf(ctx, slog.LevelWarn, "turnframe: remote reference dropped: it is not one a store keeps",
			append(rowAttrs(c), slog.Int("remote_ref_bytes", len(ref)))...)
		ref = ""
	}
	s := OutboxSettlement{Claim: c, Now: now}
	switch out.Kind {
	case DispatchCompleted:
		s.To, s.RemoteRef = OutboxCompleted, ref
		return s, fateCompleted
	case DispatchRetryable:
		if c.Attempts >= d.cfg.MaxAttempts {
			d.obs.logf(ctx, slog.LevelWarn, "turnframe: outbox row failed: its attempts are spent",
				append(rowAttrs(c), slog.String("code", code))...)
			s.To, s.Code = OutboxFailed, CodeAttemptsExhausted
			return s, fateFailed
		}
		s.To, s.Code, s.RetryAt = OutboxPending, code, now.Add(d.cfg.BackoffFor(c.Attempts))
		return s, fateRetried
	case DispatchPermanent:
		s.To, s.Code = OutboxFailed, code
		return s, fateFailed
	default:
		s.To, s.RemoteRef = OutboxOutcomeUnknown, ref
		return s, fateUnknown
	}
}

// settleQueued is the settler: it takes every settlement that is ready (at
// least one, never waiting for more), writes them in one Settle call, and
// records each row's fate, until the queue is closed and empty.
func (d *Dispatcher) settleQueued(ctx context.Context, queue <-chan queuedSettlement, claims []Claim, fates []rowFate) {
	for first := range queue {
		batch := []queuedSettlement{first}
	drain:
		for {
			select {
			case q, ok := <-queue:
				if !ok {
					break drain
				}
				batch = append(batch, q)
			default:
				break drain
			}
		}
		d.settleBatch(ctx, batch, claims, fates)
	}
}

// settleBatch writes one group of settlements and records each row's fate
// from its own result.
func (d *Dispatcher) settleBatch(ctx context.Context, batch []queuedSettlement, claims []Claim, fates []rowFate) {
	settlements := make([]OutboxSettlement, len(batch))
	for i, q := range batch {
		settlements[i] = q.settlement
	}
	results, err := d.store.Settle(ctx, settlements)
	if err == nil && len(results) != len(batch) {
		err = fmt.Errorf("store answered %d results for %d settlements", len(results), len(batch))
	}
	for i, q := range batch {
		c := claims[q.idx]
		attrs := append(rowAttrs(c), slog.String("outcome", q.out.Kind.String()), slog.String("code", q.out.Code))
		rowErr := err
		if rowErr == nil {
			rowErr = results[i]
		}
		if rowErr != nil {
			// The row stays as the store has it. If it is still ours and
			// Dispatching, ReleaseExpiredClaims will put it back in the
			// queue, and a send that may have left is then sent again
			// under the same key: say so loudly.
			level := slog.LevelWarn
			if q.fate == fateUnknown || q.fate == fateCompleted {
				level = slog.LevelError
			}
			d.obs.logf(ctx, level, "turnframe: outbox row could not be settled",
				append(attrs, slog.String("settle_to", q.settlement.To.String()), slog.String("error", rowErr.Error()))...)
			continue
		}
		fates[q.idx] = q.fate
		switch q.fate {
		case fateCompleted:
			d.obs.count(SignalOutboxCompleted, Labels{Destination: c.Destination})
		case fateRetried:
			d.obs.count(SignalOutboxRetried, Labels{Destination: c.Destination, Outcome: q.settlement.Code})
		case fateFailed:
			d.obs.count(SignalOutboxFailed, Labels{Destination: c.Destination, Outcome: q.settlement.Code})
		case fateUnknown:
			d.obs.count(SignalExternalOutcomeUnknown, Labels{Destination: c.Destination})
		}
		d.obs.logf(ctx, slog.LevelDebug, "turnframe: outbox row settled",
			append(attrs, slog.String("status", q.settlement.To.String()))...)
	}
}
