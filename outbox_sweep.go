package turnframe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"
)

// This file is one RunOnce at work on the rows it claimed: the senders, the
// settler that writes their settlements (group commit, retried while the
// store is busy) and the keeper that extends the leases of the rows not yet
// settled. All three end before RunOnce returns.

// Bounds of the settler's wait between two tries of a busy store.
const (
	settleRetryFirst = 10 * time.Millisecond
	settleRetryMax   = time.Second
)

// pastCaller returns ctx without its cancellation, for a write of what is
// known only in memory (a settlement, a command's outcome, a lease
// extension), bounded instead by what is left at now of a lease that ends
// at until, and at least settleRetryMax: a write waiting for a lock another
// session keeps ends once waiting is of no use.
func pastCaller(ctx context.Context, until, now time.Time) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), max(until.Sub(now), settleRetryMax))
}

// sweep is one RunOnce's claimed batch (or one of Run's).
type sweep struct {
	ctx    context.Context // the sends' and the keeper's: RunOnce's caller's; Run's ends a grace period after Run's
	stop   context.Context // sends stop starting when it ends: the caller's
	d      *Dispatcher
	claims []Claim
	now    time.Time // the claim's time
	start  time.Time // the Dispatcher's clock (WithClock) at the claim: now + the clock's time since start is the sweep's clock
	fates  []rowFate // written by the settler and the writes it hands on, each row once

	// writing is held by the keeper for each extension, and by the
	// settler while it marks the rows of a write as settling, so a lease
	// extension never meets a row this sweep settled or is settling: a
	// lost claim it reports is someone else's doing. The settler writes
	// without it: a settlement waiting for a lock on one row must not
	// keep the keeper from the other rows' leases.
	writing sync.Mutex

	mu       sync.Mutex
	open     map[int]bool // rows not settled and not given up: the keeper extends their leases
	settling map[int]bool // rows whose settlement is being written: the keeper extends them only after a step (extendSettling)
	lost     map[int]bool // rows whose extension the store refused (ErrClaimLost): never sent
	started  map[int]bool // rows whose send started (startSend): only these may be sent on a claim lost meanwhile
	done     map[int]bool // rows whose send is over (or never started): only their settlement is left
	until    []time.Time  // each row's lease end, as the store last granted it
	real     []time.Time  // the instant on the real (monotonic) clock each row's lease, as last granted, ends: a wall step does not move it (followStep)
}

// queuedSettlement is a sent row's settlement, waiting for the settler.
type queuedSettlement struct {
	idx        int // the row's place in the claim
	settlement OutboxSettlement
	fate       rowFate // what the row becomes once the settlement is written
	out        Dispatched
	unsent     bool // its send never started: there is no answer to keep
}

// newSweep returns the sweep of claims, claimed at now, which the
// Dispatcher's clock read as start (before the claim: its leases run from
// there, however long the claim took). Its rows are sent under ctx, and
// none starts once stop ended.
func newSweep(ctx, stop context.Context, d *Dispatcher, claims []Claim, now, start time.Time) *sweep {
	sw := &sweep{
		ctx: ctx, stop: stop, d: d, claims: claims, now: now, start: start,
		fates:    make([]rowFate, len(claims)),
		open:     make(map[int]bool, len(claims)),
		settling: make(map[int]bool),
		lost:     make(map[int]bool),
		started:  make(map[int]bool),
		done:     make(map[int]bool),
		until:    make([]time.Time, len(claims)),
		real:     make([]time.Time, len(claims)),
	}
	clock, mono := sw.clock(), time.Now()
	for i, c := range claims {
		sw.open[i] = true
		sw.until[i] = c.LeaseUntil
		sw.real[i] = mono.Add(c.LeaseUntil.Sub(clock))
	}
	return sw
}

// clock is the sweep's time: the claim's now, plus the time spent since,
// as the Dispatcher's clock (WithClock) tells it on its wall reading
// (Round(0) drops time.Now's monotonic one). Leases are stored and judged
// on the wall clock — by Recover, by Run's release, by another process —
// so after the machine's clock was stepped forward an extension measured
// on the monotonic clock would end in the past, and a release would take
// the row of a live send.
func (sw *sweep) clock() time.Time {
	return sw.now.Add(sw.d.clock.clock().Round(0).Sub(sw.start.Round(0)))
}

// run sends every claimed row, settles each, and returns once the senders,
// the settler and the keeper have all ended.
func (sw *sweep) run() {
	defer sw.d.live.remove(sw) // added by its claim (Dispatcher.claimLive)
	queue := make(chan queuedSettlement, len(sw.claims))
	settled := make(chan struct{})
	go func() {
		defer close(settled)
		sw.settleQueued(queue)
	}()
	keeperDone := make(chan struct{})
	go func() {
		defer close(keeperDone)
		sw.keepLeases(settled)
	}()

	next := make(chan int, len(sw.claims))
	for i := range sw.claims {
		next <- i
	}
	close(next)
	var senders sync.WaitGroup
	for range min(sw.d.cfg.Concurrency, len(sw.claims)) {
		senders.Go(func() {
			for i := range next {
				q := sw.dispatchRow(i)
				sw.mu.Lock()
				sw.done[i] = true
				sw.mu.Unlock()
				queue <- q
			}
		})
	}
	senders.Wait()
	close(queue)
	<-settled
	<-keeperDone
}

// dispatchRow sends one claimed row, once its destination has a place
// (DestinationLimits), unless the sweep was stopped first or the row is a
// resend whose remote forgot the key (withhold), and returns the
// settlement its outcome calls for.
func (sw *sweep) dispatchRow(idx int) queuedSettlement {
	d, c := sw.d, sw.claims[idx]
	notSentUntil := func(why string, due time.Time) queuedSettlement {
		d.obs.logf(sw.ctx, slog.LevelInfo, "turnframe: outbox row not sent: "+why,
			append(rowAttrs(c), slog.String("code", CodeNotSent))...)
		return queuedSettlement{
			idx:        idx,
			settlement: OutboxSettlement{Claim: c, To: OutboxPending, Code: CodeNotSent, RetryAt: due, Now: sw.now},
			fate:       fateRetried,
			out:        Dispatched{Kind: DispatchRetryable, Code: CodeNotSent},
			unsent:     true,
		}
	}
	notSent := func(why string) queuedSettlement { return notSentUntil(why, sw.now) }
	if !d.limits.acquire(sw.stop, c.Destination) {
		return notSent("the sweep was cancelled")
	}
	if !sw.clock().Before(sw.leaseEnd(idx)) || sw.claimLost(idx) {
		// Its lease ran out while it waited for its turn (the keeper could
		// not extend it), or an extension found its claim lost: recovery
		// may have expired the row and handed it on. A send needs the
		// claim; the settlement, fenced on it, puts the row back only if
		// it still holds.
		d.limits.release(c.Destination)
		return notSent("its claim ended (lease run out or lost) before its send started")
	}
	judged := sw.clock()
	if q, held := sw.holdLapsed(idx, judged, notSentUntil); held {
		return q
	}
	if !sw.covered(idx) {
		// It waited while the keeper could not extend its lease, and what
		// is left would end before the send's deadline: recovery could
		// expire the row and hand it on while this send still runs.
		d.limits.release(c.Destination)
		return notSent("its lease could not be renewed to cover its send")
	}
	if !d.clock.rowKeyForgotten(c.Destination, c.CreatedAt, judged, d.cfg.SendTimeout) {
		// Judged in time before a renewal the store may have been slow to
		// grant: the send starts now, and must still arrive in time.
		if q, held := sw.holdLapsed(idx, sw.clock(), notSentUntil); held {
			return q
		}
	}
	if !sw.startSend(idx) {
		d.limits.release(c.Destination)
		return notSent("its claim was found lost before its send started")
	}
	out, sent := d.send(sw.ctx, sw.stop, c)
	d.limits.release(c.Destination)
	if !sent { // stopped after it took its place, before its send started
		return notSent("the sweep was cancelled")
	}
	s, fate := d.settlementFor(sw.ctx, c, out, sw.now, sw.clock())
	return queuedSettlement{idx: idx, settlement: s, fate: fate, out: out}
}

// holdLapsed judges claimed row idx, about to be sent at now, by
// Dispatcher.resendLapsed: a lapsed resend is withheld, and a row whose
// history could not be read goes back unsent (notSentUntil) after the
// backoff a retryable answer would have earned. held says the row is not
// to be sent, q its settlement; the row's destination place is then given
// back.
func (sw *sweep) holdLapsed(idx int, now time.Time, notSentUntil func(why string, due time.Time) queuedSettlement) (q queuedSettlement, held bool) {
	d, c := sw.d, sw.claims[idx]
	lapsed, err := d.resendLapsed(sw.ctx, c, now)
	if err == nil && !lapsed {
		return queuedSettlement{}, false
	}
	d.limits.release(c.Destination)
	if err != nil {
		d.obs.logf(sw.ctx, slog.LevelWarn, "turnframe: could not tell whether an outbox row is a resend its remote forgot",
			append(rowAttrs(c), slog.String("error", err.Error()))...)
		// Due at once, Run would claim it again at once and read the
		// failing store again: a hot loop for as long as it fails. It
		// waits the backoff a retryable answer would have earned.
		return notSentUntil("its history could not be read to tell whether its remote still remembers its key",
			retryAt(sw.now, sw.now, d.cfg.BackoffFor(c.Attempts-c.AttemptBase), 0, d.cfg.MaxBackoff)), true
	}
	return sw.withhold(idx), true
}

// settleQueued is the settler: it takes every settlement that is ready (at
// least one, never waiting for more), writes them in one Settle call, and
// records each row's fate, until the queue is closed and empty and every
// write it handed on (settleBatch) has ended.
func (sw *sweep) settleQueued(queue <-chan queuedSettlement) {
	var apart sync.WaitGroup
	defer apart.Wait()
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
		sw.settleBatch(batch, &apart)
	}
}

// settleBatch writes one group of settlements and records each row's fate
// from its own result. A group the store refused as busy, or whose try was
// cut, is written again on a goroutine of its own (apart), so the settler
// goes on with the settlements queued after it: a row another session
// keeps locked holds up none of them.
func (sw *sweep) settleBatch(batch []queuedSettlement, apart *sync.WaitGroup) {
	settlements := make([]OutboxSettlement, len(batch))
	idx := make([]int, len(batch))
	for i, q := range batch {
		settlements[i], idx[i] = q.settlement, q.idx
	}
	results, final, err := sw.tryWrite(settlements, idx)
	if !again(final, len(settlements), err) {
		sw.record(batch, results, err)
		return
	}
	apart.Go(func() {
		results, err := sw.writeAgain(settlements, idx, err)
		sw.record(batch, results, err)
	})
}

// record records each row's fate from its own result (results, or err for
// the whole batch).
func (sw *sweep) record(batch []queuedSettlement, results []error, err error) {
	d := sw.d
	if err == nil && len(results) != len(batch) {
		err = fmt.Errorf("store answered %d results for %d settlements", len(results), len(batch))
	}
	for i, q := range batch {
		c := sw.claims[q.idx]
		attrs := append(rowAttrs(c), slog.String("outcome", q.out.Kind.String()), slog.String("code", q.out.Code))
		rowErr := err
		if rowErr == nil {
			rowErr = results[i]
		}
		if rowErr != nil && q.unsent && errors.Is(rowErr, ErrClaimLost) {
			// Nothing left under this claim, and the row is another
			// claim's now (or settled): there is nothing to settle by hand.
			d.obs.logf(sw.ctx, slog.LevelWarn, "turnframe: outbox row not settled: its claim was lost, and nothing was sent under it",
				append(attrs, slog.String("settle_to", q.settlement.To.String()), slog.String("error", rowErr.Error()))...)
			continue
		}
		if rowErr != nil {
			// The row stays as the store has it. If it is still ours and
			// Dispatching, a release once its lease ended puts it back in
			// the queue, and a send that may have left is then sent again
			// under the same key: say so loudly, with what the send said,
			// so an operator can settle it.
			d.obs.logf(sw.ctx, slog.LevelError, "turnframe: outbox row could not be settled; settle it by hand",
				append(attrs, slog.String("settle_to", q.settlement.To.String()), slog.String("error", rowErr.Error()))...)
			if errors.Is(rowErr, ErrClaimLost) {
				d.recordLate(sw.ctx, c, q.out.RemoteRef, fmt.Sprintf("the send answered after its claim was lost: %v %s", q.out.Kind, q.out.Code))
			}
			continue
		}
		sw.fates[q.idx] = q.fate
		switch q.fate {
		case fateCompleted:
			d.obs.count(SignalOutboxCompleted, Labels{Destination: c.Destination})
		case fateRetried:
			d.obs.count(SignalOutboxRetried, Labels{Destination: c.Destination, Outcome: q.settlement.Code})
		case fateFailed:
			d.obs.count(SignalOutboxFailed, Labels{Destination: c.Destination, Outcome: q.settlement.Code})
		case fateUnknown:
			d.obs.count(SignalExternalOutcomeUnknown, Labels{Destination: c.Destination, Outcome: q.settlement.Code})
		}
		d.obs.logf(sw.ctx, slog.LevelDebug, "turnframe: outbox row settled",
			append(attrs, slog.String("status", q.settlement.To.String()))...)
	}
}

// write hands settlements to the store, trying again with backoff while the
// store is busy. It gives up only when the store is closed, or fails with
// anything else, or when the caller's context ended and the rows' leases
// ended too (by then a release may have taken them), or when one try
// outlasts the leases. The store call itself runs even after the caller's
// context ended: a send that happened must be recorded. Each try is
// bounded by the rows' leases instead (pastCaller): the keeper extends
// rows being settled only when the wall clock stepped (extendSettling). A
// batch refused as busy, or cut by the end of the leases, is written again
// row by row (writeEach): a row no one else holds may still be this
// sweep's. A single whose try was cut is written again while its claim,
// renewed, holds (tryWrite). Once it has its answer, the rows idx are out
// of the keeper's care.
func (sw *sweep) write(settlements []OutboxSettlement, idx []int) ([]error, error) {
	results, final, err := sw.tryWrite(settlements, idx)
	if !again(final, len(settlements), err) {
		return results, err
	}
	return sw.writeAgain(settlements, idx, err)
}

// again reports whether a try of n settlements that answered (final, err)
// is to be written again: it was refused as busy, or a batch's was cut.
func again(final bool, n int, err error) bool {
	return !final || (n > 1 && errors.Is(err, errLeasesRanOut))
}

// writeAgain is write after a first try that is to be written again, err
// its error: a batch row by row, a single with backoff.
func (sw *sweep) writeAgain(settlements []OutboxSettlement, idx []int, err error) ([]error, error) {
	d := sw.d
	if len(settlements) > 1 {
		d.obs.logf(sw.ctx, slog.LevelWarn, "turnframe: a batch of settlements was refused or cut; each is written again alone",
			slog.Int("rows", len(settlements)), slog.String("error", err.Error()))
		return sw.writeEach(settlements, idx), nil
	}
	cutBefore := false // a try was cut, and may have committed before its answer was lost
	for wait := settleRetryFirst; ; wait = min(2*wait, settleRetryMax) {
		cutBefore = cutBefore || errors.Is(err, errLeasesRanOut)
		d.obs.logf(sw.ctx, slog.LevelWarn, "turnframe: store busy; the settlement will be written again",
			slog.Int("rows", len(settlements)), slog.Duration("wait", wait), slog.String("error", err.Error()))
		t := time.NewTimer(wait)
		<-t.C
		results, final, terr := sw.tryWrite(settlements, idx)
		if final {
			if cutBefore && terr == nil && len(results) == 1 && errors.Is(results[0], ErrClaimLost) && sw.landed(settlements[0]) {
				results[0] = nil // the cut try had committed it
			}
			return results, terr
		}
		err = terr
	}
}

// errLeasesRanOut is a settlement's try cut by the end of its rows' leases
// (pastCaller).
var errLeasesRanOut = errors.New("the rows' leases ran out while their settlement waited to be written")

// writeEach writes each settlement alone, all at once, each tried again
// as write does, and returns each one's result: a row another session
// keeps locked (PostgreSQL) must not hold up the others of its batch until
// their leases end. A single refused as ErrClaimLost whose row stands as its
// settlement makes it (landed) was written by the batch's cut try.
func (sw *sweep) writeEach(settlements []OutboxSettlement, idx []int) []error {
	results := make([]error, len(settlements))
	var wg sync.WaitGroup
	for i := range settlements {
		wg.Go(func() {
			r, err := sw.write(settlements[i:i+1], idx[i:i+1])
			if err == nil && len(r) != 1 {
				err = fmt.Errorf("store answered %d results for 1 settlement", len(r))
			}
			if err == nil {
				err = r[0]
			}
			if errors.Is(err, ErrClaimLost) && sw.landed(settlements[i]) {
				err = nil // the batch's cut try had committed it
			}
			results[i] = err
		})
	}
	wg.Wait()
	return results
}

// tryWrite writes settlements once, the rows idx marked settling, and
// reports whether its answer is final. A final answer takes the rows out of
// the keeper's care before they stop being settling.
func (sw *sweep) tryWrite(settlements []OutboxSettlement, idx []int) (results []error, final bool, err error) {
	sw.markSettling(idx, true)
	defer sw.markSettling(idx, false)
	tctx, cancel := sw.pastCaller(idx...)
	results, err = sw.d.store.Settle(tctx, settlements)
	cut := tctx.Err() != nil
	cancel()
	if err != nil && cut {
		err = fmt.Errorf("%w: %w", errLeasesRanOut, err)
		if len(idx) == 1 && sw.ctx.Err() == nil && sw.renew(idx[0], "turnframe: outbox row's lease could not be renewed after its settlement's try was cut") {
			// Its claim holds, and now runs a lease from now: the try
			// was cut while waiting was still of use (a forward step of
			// the wall clock had left it a second, pastCaller). It is
			// written again. Once the caller's context ended, no lease
			// is renewed: the try was given what the leases had left.
			return nil, false, err
		}
		if len(idx) == 1 && sw.ctx.Err() != nil && sw.leaseRuns(idx[0]) {
			// The caller's context ended, yet the lease still runs: the
			// try was bounded by what a forward step of the wall clock
			// had left of it, and the keeper (followStep) has since moved
			// it to where it ends on the real clock. It is written again
			// within it: a step must not cut the last settlements short.
			return nil, false, err
		}
		if len(idx) == 1 && sw.landed(settlements[0]) {
			results, err = []error{nil}, nil // the cut try had committed before its answer was lost
		}
	} else if err != nil && errors.Is(err, ErrBusy) && !errors.Is(err, ErrClosed) {
		if sw.ctx.Err() == nil || sw.clock().Before(sw.leaseEnd(idx...)) {
			return nil, false, err
		}
		err = fmt.Errorf("%w (the sweep's context ended and its leases too: given up)", err)
	}
	if len(idx) > 1 && errors.Is(err, errLeasesRanOut) {
		return results, true, err // written again row by row (write): the keeper keeps their leases meanwhile
	}
	sw.mu.Lock()
	for _, i := range idx {
		delete(sw.open, i)
	}
	sw.mu.Unlock()
	return results, true, err
}

// markSettling marks the rows idx as settling, or no longer. It is marked
// holding writing, so an extension already under way ends first.
func (sw *sweep) markSettling(idx []int, settling bool) {
	if settling {
		sw.writing.Lock()
		defer sw.writing.Unlock()
	}
	sw.mu.Lock()
	defer sw.mu.Unlock()
	for _, i := range idx {
		if settling {
			sw.settling[i] = true
		} else {
			delete(sw.settling, i)
		}
	}
}

// startSend marks row idx's send as started, unless an extension found its
// claim lost: checked and marked at once, so the keeper's warning that a
// row may be sent twice (extend) is given exactly for the rows whose send
// may be running.
func (sw *sweep) startSend(idx int) bool {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.lost[idx] {
		return false
	}
	sw.started[idx] = true
	return true
}

// claimLost reports whether an extension found row idx's claim lost.
func (sw *sweep) claimLost(idx int) bool {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return sw.lost[idx]
}

// leaseEnd is the latest lease end the store granted the rows idx.
func (sw *sweep) leaseEnd(idx ...int) time.Time {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	var end time.Time
	for _, i := range idx {
		if sw.until[i].After(end) {
			end = sw.until[i]
		}
	}
	return end
}

// leaseRuns reports whether row idx's lease runs on the sweep's clock and
// on the real one both.
func (sw *sweep) leaseRuns(idx int) bool {
	now, mono := sw.clock(), time.Now()
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return now.Before(sw.until[idx]) && mono.Before(sw.real[idx])
}

// pastCaller is the context of a write the sweep makes about the rows idx
// past its caller's context: the function pastCaller, bounded by the rows'
// leases.
func (sw *sweep) pastCaller(idx ...int) (context.Context, context.CancelFunc) {
	return pastCaller(sw.ctx, sw.leaseEnd(idx...), sw.clock())
}

// covered reports whether row idx's lease covers a send started now to its
// deadline, as a fresh claim's does (Lease less LeaseMargin: SendTimeout,
// unless Lease is capped). When it does not, because the row waited for a
// sender or a destination's place while the keeper could not extend its
// lease, covered extends that row's claim alone and reports whether the
// store granted it; a claim the store says is lost is marked lost.
func (sw *sweep) covered(idx int) bool {
	d := sw.d
	need := d.cfg.Lease() - d.cfg.LeaseMargin
	if sw.leaseEnd(idx).Sub(sw.clock()) >= need {
		return true
	}
	return sw.renew(idx, "turnframe: outbox row's lease could not be renewed before its send")
}

// renew extends row idx's claim alone, at the sweep's clock, and reports
// whether the store granted it; a claim the store says is lost is marked
// lost. A failed write is logged with msg.
func (sw *sweep) renew(idx int, msg string) bool {
	d := sw.d
	sw.writing.Lock()
	defer sw.writing.Unlock()
	until, real, results, err := sw.extendClaims([]int{idx}, []Claim{sw.claims[idx]})
	if err != nil || len(results) != 1 {
		d.obs.logf(sw.ctx, slog.LevelWarn, msg,
			append(rowAttrs(sw.claims[idx]), slog.Any("error", err), slog.Int("results", len(results)))...)
		return false
	}
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if results[0] != nil {
		sw.lost[idx] = true
		return false
	}
	sw.grantedLocked(idx, until, real)
	return true
}

// endsSoon reports whether an open row's lease ends within half a lease
// margin of the sweep's clock: sooner than the keeper ever lets one come,
// unless the clock stepped (liveSweeps.catchUp). open is for the rows not
// being settled, which extend extends; settling for the rows whose
// settlement is being written, which only extendSettling extends.
func (sw *sweep) endsSoon() (open, settling bool) {
	soon := sw.clock().Add(sw.d.cfg.LeaseMargin / 2)
	sw.mu.Lock()
	defer sw.mu.Unlock()
	for i := range sw.open {
		if !sw.until[i].After(soon) {
			if sw.settling[i] {
				settling = true
			} else {
				open = true
			}
		}
	}
	return open, settling
}

// extendSettling extends the leases of the rows whose settlement is being
// written and whose lease ends within half a lease margin: only a wall
// clock stepped forward brings them so near while their try runs (each
// try is bounded by what was left of the leases when it began), and a
// release would then take the row of a send that is over and whose
// outcome is being written, and its policy send it again. They are
// extended apart from the other rows, so a row another session keeps
// locked holds up no other's extension; a row whose settlement landed
// meanwhile is refused (ErrClaimLost), which the settler's own answer
// records.
func (sw *sweep) extendSettling() {
	d := sw.d
	soon := sw.clock().Add(d.cfg.LeaseMargin / 2)
	idx, claims := sw.pick(func(i int) bool { return sw.settling[i] && !sw.until[i].After(soon) })
	if len(claims) == 0 {
		return
	}
	until, real, results, err := sw.extendClaims(idx, claims)
	if err != nil || len(results) != len(claims) {
		d.obs.logf(sw.ctx, slog.LevelWarn, "turnframe: the leases of outbox rows being settled could not be extended",
			slog.Int("rows", len(claims)), slog.Any("error", err), slog.Int("results", len(results)))
		return
	}
	sw.mu.Lock()
	defer sw.mu.Unlock()
	for i, rerr := range results {
		if rerr == nil {
			sw.grantedLocked(idx[i], until, real)
		}
	}
}

// extendClaims extends the claims of the rows idx to a lease from the
// sweep's clock, bounded by what is left of their leases (pastCaller), and
// returns the lease end it asked for, on the sweep's clock and on the real
// one, with the store's answer.
func (sw *sweep) extendClaims(idx []int, claims []Claim) (until, real time.Time, results []error, err error) {
	now, mono, lease := sw.clock(), time.Now(), sw.d.cfg.Lease()
	ctx, cancel := sw.pastCaller(idx...)
	defer cancel()
	results, err = sw.d.store.ExtendClaims(ctx, claims, now, lease)
	return now.Add(lease), mono.Add(lease), results, err
}

// grantedLocked records a lease the store granted row i, ending at until
// on the sweep's clock and at real on the real one, unless the row already
// holds a later one. sw.mu is held.
func (sw *sweep) grantedLocked(i int, until, real time.Time) {
	if until.After(sw.until[i]) {
		sw.until[i], sw.real[i] = until, real
	}
}

// followStep is what the keeper and catchUp do for a sweep whose caller's
// context ended. Its leases are no longer extended: its writes are bounded
// by them as they stand, so RunOnce returns soon after they end. But a
// forward step of the wall clock must not shorten them either, or a
// release takes the row of a send that is over and whose settlement is
// being written, and its policy sends it again. Each open row whose lease
// ends within half a lease margin, a step of more than stepCheck having
// brought it there, is extended to what its lease had left on the real
// clock, never further.
func (sw *sweep) followStep() {
	now, mono := sw.clock(), time.Now()
	soon := now.Add(sw.d.cfg.LeaseMargin / 2)
	sw.mu.Lock()
	var idx []int
	for i := range sw.open {
		l := sw.real[i].Sub(mono)
		if !sw.until[i].After(soon) && l > 0 && now.Add(l).Sub(sw.until[i]) > stepCheck {
			idx = append(idx, i)
		}
	}
	sw.mu.Unlock()
	for _, i := range idx {
		// Each row's move is read again and bounded by where its lease
		// ends on the real clock: the rows are moved one after the other,
		// and once a row settled or its lease ended, moving it is of no
		// use. Bounded as other lease writes are (at least a second), a
		// store whose writes stall would hold the keeper, and RunOnce, a
		// second a row past the leases.
		sw.mu.Lock()
		open, end := sw.open[i], sw.real[i]
		sw.mu.Unlock()
		now, l := sw.clock(), time.Until(end)
		if !open || l <= 0 {
			continue
		}
		ctx, cancel := context.WithDeadline(context.WithoutCancel(sw.ctx), end)
		results, err := sw.d.store.ExtendClaims(ctx, []Claim{sw.claims[i]}, now, l)
		cancel()
		if err != nil || len(results) != 1 || results[0] != nil {
			continue // refused: its settlement landed meanwhile, or a release took it
		}
		sw.mu.Lock()
		if until := now.Add(l); until.After(sw.until[i]) {
			sw.until[i] = until // real[i] stays: the same instant
		}
		sw.mu.Unlock()
	}
}

// pick returns the open rows for which keep, called holding mu, says
// true: their places in the claim, and their claims.
func (sw *sweep) pick(keep func(i int) bool) (idx []int, claims []Claim) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	for i := range sw.claims {
		if sw.open[i] && keep(i) {
			idx, claims = append(idx, i), append(claims, sw.claims[i])
		}
	}
	return idx, claims
}

// keepLeases extends the leases of the open rows every LeaseMargin/2 until
// settled is closed, so a lease never ends while this sweep runs: each
// extension runs SendTimeout + LeaseMargin from its time. A sweep that ends
// sooner writes no extension at all. Between extensions it looks, at least
// every second (keeperCadence), whether the wall clock stepped forward so far that a
// lease ends within half a margin, and extends at once if so: a release
// elsewhere would take the rows of a live send in the meantime. Once the
// caller's context ended it extends no more: no send starts or runs on
// after that, and the settler's tries are bounded by the leases as they
// stand. It goes on looking until the settler is done, though, and follows
// a step by moving the leases only to where they end on the real clock
// (followStep), so that no release, in this process or another, takes the
// row of a send that is over while its settlement is being written.
func (sw *sweep) keepLeases(settled <-chan struct{}) {
	look, looks := keeperCadence(sw.d.cfg.LeaseMargin)
	tick := time.NewTicker(look)
	defer tick.Stop()
	ended := sw.ctx.Done()
	for n := 1; ; n++ {
		select {
		case <-settled:
			return
		case <-ended:
			ended = nil // from here on it only follows steps
		case <-tick.C:
			open, settling := sw.endsSoon()
			if sw.ctx.Err() != nil { // a tick and the end both ready: the end wins
				if open || settling {
					sw.followStep()
				}
				continue
			}
			if n >= looks || open {
				sw.extend()
				n = 0
			}
			if settling {
				sw.extendSettling()
			}
		}
	}
}

// stepCheck is how often, at the most, a sweep's keeper looks for a
// forward step of the wall clock between its extensions; the look reads
// no store.
const stepCheck = time.Second

// keeperCadence returns how often a keeper looks, and every how many looks
// it extends, for margin: the extensions come every margin/2 (the looks
// divide it, to the nanosecond), and the looks at most every stepCheck.
func keeperCadence(margin time.Duration) (look time.Duration, looks int) {
	every := max(margin/2, time.Millisecond)
	looks = int((every + stepCheck - 1) / stepCheck)
	return every / time.Duration(looks), looks
}

// extend extends the leases of the open rows once. A claim the store says
// is lost is no longer extended. If the row's send is running, someone
// else released it (its lease ended while the store was unreachable), and
// the row may be sent twice. If it has not started, it never will; if it
// is over, its settlement will tell what happened: a batch whose try was
// cut may have landed after all (landed), which also ends the claim.
func (sw *sweep) extend() {
	d := sw.d
	sw.writing.Lock()
	defer sw.writing.Unlock()
	idx, claims := sw.pick(func(i int) bool { return !sw.settling[i] })
	if len(claims) == 0 {
		return
	}
	until, real, results, err := sw.extendClaims(idx, claims)
	if err != nil {
		d.obs.logf(sw.ctx, slog.LevelWarn, "turnframe: outbox leases could not be extended; the keeper tries again at its next extension, or its next look if a lease is near its end",
			slog.Int("rows", len(claims)), slog.String("error", err.Error()))
		return
	}
	if len(results) != len(claims) {
		d.obs.logf(sw.ctx, slog.LevelWarn, "turnframe: outbox leases: the store answered the wrong number of results",
			slog.Int("rows", len(claims)), slog.Int("results", len(results)))
		return
	}
	for i, rerr := range results {
		if rerr == nil {
			sw.mu.Lock()
			sw.grantedLocked(idx[i], until, real)
			sw.mu.Unlock()
			continue
		}
		sw.mu.Lock()
		sw.lost[idx[i]] = true // not extended: its send, if not started, never starts
		delete(sw.open, idx[i])
		running := sw.started[idx[i]] && !sw.done[idx[i]]
		sw.mu.Unlock()
		if !running {
			d.obs.logf(sw.ctx, slog.LevelDebug, "turnframe: outbox row's claim ended while its send was not running; its settlement will tell",
				append(rowAttrs(sw.claims[idx[i]]), slog.String("error", rerr.Error()))...)
			continue
		}
		d.obs.logf(sw.ctx, slog.LevelError, "turnframe: outbox row lost its claim while its send may run; it may be sent twice",
			append(rowAttrs(sw.claims[idx[i]]), slog.String("error", rerr.Error()))...)
	}
}

// landed reports whether s was written: a batch whose try was cut may have
// committed before its answer was lost. The row as it stands cannot say
// for sure: since then another worker may have claimed it again, or an
// operator's release left it looking like s's move. Its history can
// (wroteMove); a store without history is judged by the row.
func (sw *sweep) landed(s OutboxSettlement) bool {
	ctx, cancel := sw.pastCaller()
	defer cancel()
	if hs, ok := sw.d.store.(HistoryStore); ok {
		return wroteMove(ctx, hs, s)
	}
	r, err := sw.d.store.GetOutbox(ctx, s.Claim.ID)
	return err == nil && r.Status == s.To && r.ClaimedBy == s.Claim.Worker && r.Attempts == s.Claim.Attempts && r.LastCode == s.Code
}

// wroteMove reports whether the history of s's row holds s's move: from
// Dispatching to s.To, at s's attempt, by s's actor (its worker, or the
// policy for a withheld resend), with s's code. Only
// s's own transaction records that move. A history that cannot be read
// says no: the row is then reported refused, the safe side.
func wroteMove(ctx context.Context, hs HistoryStore, s OutboxSettlement) bool {
	subject := OutboxSubject(s.Claim.Account, s.Claim.ID)
	attempt, actor := strconv.Itoa(s.Claim.Attempts), s.SettledBy()
	for after := int64(0); ; {
		recs, err := hs.History(ctx, subject, after, landedPage)
		if err != nil {
			return false
		}
		for _, h := range recs {
			if !h.Evidence && h.From == OutboxDispatching.String() && h.To == s.To.String() &&
				h.Attempt == attempt && h.Actor == actor && h.Code == s.Code {
				return true
			}
		}
		if len(recs) < landedPage {
			return false
		}
		after = recs[len(recs)-1].Seq
	}
}

// landedPage is how many history records landed reads at a time.
const landedPage = 100
