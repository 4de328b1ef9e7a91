package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/turnframe/turnframe"
)

// The fault points of the crash harness, beside the kills. Each is drawn
// from the seed, fires only with TURNFRAME_CRASHTEST_FAULTS=1, and reports
// itself on a progress line ("P fault NAME …"), so that the parent counts
// it and a kill can land right after it.
//
//	(a) Between a settlement and a phase move. While the handler of a
//	    turn's last command runs, a concurrent actor — another Runtime and
//	    Recovery, on a connection of their own — abandons the turn
//	    ("abandon"), or resends (Recovery.Settle, as the application) another
//	    command of the turn that is outcome unknown and that the remote never
//	    received ("resend_meanwhile"; only against a remote the policy would
//	    resend to as well: not the neither kind). The handler's settlement
//	    carries the turn's move to Committed as Write.Advance: the move is
//	    refused, and the settlement must land all the same
//	    ("abandon_settled", "resend_meanwhile_settled"); a settlement that
//	    does not land stops the child with an error. The resent command runs
//	    again under its key, in the same Execute loop or in recovery. A
//	    local command (turnframe.WithLocalCommand) holds no attempt while it
//	    runs: on a turn abandoned meanwhile its commit is refused whole
//	    ("local_refused"), it stays Pending and never runs, and the audit
//	    checks nothing of it was written. Another command of the turn that
//	    a lookup found the remote never received, put back to Pending by the
//	    policy just before the abandonment, stays Pending and never runs, as
//	    any Pending entry of an abandoned turn (a new turn that plans it
//	    adopts it): the audit checks the resend landed first and the remote
//	    never applied it.
//	(b) A busy database during settlement. After a send answered, the
//	    sender holds the database's writes up (Backend.Locker: SQLite's
//	    write lock, PostgreSQL's outbox table) on a connection of its own for
//	    150–300 ms, longer than the dispatcher's busy timeout (80 ms), so the
//	    settlement is refused with ErrBusy ("busy_settle") and must be tried
//	    again until it lands. The other process, the expirer and the
//	    keeper meet the held database too. The audit checks that no row whose
//	    send's outcome was known when the lock was taken ("busy_lock") was
//	    sent again, unless its worker died first (and the policy resent it).
//	(c) A lease that ends during a slow send. Now and then a working child's
//	    whole dispatch sweep is slow ("slow_send"): the remote applies each
//	    row and holds its answer back 650 ms, longer than the lease margin
//	    (300 ms), so the leases the rows were claimed with (1.1 s) end while
//	    the sweep runs
//	    ("lease_outlived": a row settled after the lease it was claimed
//	    with had ended), while the expirer process calls
//	    store.ExpireClaims every 20 ms. Only the sweep's own extensions
//	    keep its rows: an expired row's settlement would be ErrClaimLost
//	    ("claim_lost_settle", which also stops the child), and the parent
//	    checks every expired row's worker was dead. A settlement refused
//	    because an earlier try of it, cut by its context, had committed
//	    unanswered (a COMMIT pipelined behind a statement waiting for the
//	    held table) finds its row settled under its own claim: that is
//	    "settle_landed_cut", which the dispatcher tells by the row's
//	    history, not a lost claim.
//
// abandonPercentOf is how often, in percent, fault (a) abandons the turn
// while its last command, of kind, runs: more often for a command that
// calls the remote, whose attempt holds a lease and must still settle
// ("abandon_settled"), than for a local one, whose commit is refused
// whole ("local_refused"), so that a run of a few kills meets both.
func abandonPercentOf(kind string) int {
	if callsRemote(kind) {
		return abandonRemotePercent
	}
	return abandonPercent
}

const (
	abandonPercent       = 10 // of local last commands: abandon the turn while the handler runs
	abandonRemotePercent = 30 // of the others
	resendPercent        = 60 // of last commands: resend another unknown command of the turn
	busyPercent          = 12 // of sends: hold the write lock while the row is settled
	slowPercent          = 30 // of a working child's dispatch sweeps with two rows or more due: every send slow
	busyHoldMin          = 150 * time.Millisecond
	busyHoldSpread       = 150 * time.Millisecond
	slowSend             = 650 * time.Millisecond // beyond the lease margin, within the send timeout; two outlast a lease
	codeFaultAbandon     = "fault.abandoned_while_running"
)

// killAfter are the fault lines after which the parent kills the child at
// once, and in what percentage of them (fewer after a slow send, which
// would otherwise rarely live to outlast its lease).
var killAfter = map[string]int{"abandon": 25, "resend_meanwhile": 25, "busy_lock": 25, "busy_settle": 25, "slow_send": 10}

// entryKey names a journal entry: keys are per account.
type entryKey struct {
	account turnframe.AccountID
	key     turnframe.IdempotencyKey
}

// firedFault is a fault of kind (a) fired while a handler ran, to check
// once its Execute returned.
type firedFault struct {
	name    string
	turn    turnframe.TurnID
	attempt turnframe.AttemptID
}

// actMeanwhile is the concurrent actor of fault (a). The handler waits for
// it, so it acts while the handler's attempt holds the command.
func (c *child) actMeanwhile(call turnframe.Call) {
	switch {
	case draw(c.seed, "abandon", call.Account, call.Command.Key) < abandonPercentOf(call.Command.Name):
		done := make(chan error, 1)
		go func() { done <- c.actor.Abandon(c.ctx, call.Account, call.Turn, codeFaultAbandon) }()
		if err := <-done; err != nil {
			return // the turn is delivered or abandoned already
		}
		c.fire(call, "abandon")
	case draw(c.seed, "resend", call.Account, call.Command.Key) < resendPercent:
		done := make(chan int, 1)
		go func() { done <- c.resendOthers(call) }()
		if <-done > 0 {
			c.fire(call, "resend_meanwhile")
		}
	}
}

// resendOthers resends every other command of the call's turn that is
// outcome unknown, flaky (its first attempt never reached the remote) and
// absent at the remote, as the application (crashActor), and reports how
// many it resent. Against a remote that can neither be asked nor
// deduplicate it resends nothing: there the policy would not either.
func (c *child) resendOthers(call turnframe.Call) int {
	if c.kind == remoteNeither {
		return 0
	}
	entries, err := c.astore.ForTurn(c.ctx, call.Account, call.Turn)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		if e.Key == call.Command.Key || e.Status != turnframe.JournalOutcomeUnknown || e.Name != kindFlaky {
			continue
		}
		if ok, err := c.applied(c.ctx, commandRemoteKey(e.Account, e.Key)); err != nil || ok {
			continue
		}
		err := c.actorRec.Settle(c.ctx, turnframe.JournalSubject(e.Account, e.Key), turnframe.Decision{
			Verdict: turnframe.VerdictResend, Actor: crashActor, Note: "fault (a): the remote never received it; resent while the turn's last command runs",
		})
		if err == nil {
			n++
		}
	}
	return n
}

func (c *child) fire(call turnframe.Call, name string) {
	c.mu.Lock()
	c.fired[entryKey{call.Account, call.Command.Key}] = firedFault{name: name, turn: call.Turn, attempt: call.Attempt}
	c.mu.Unlock()
	fault(name, "%v %s attempt %v", call.Turn, call.Command.Key, call.Attempt)
}

// checkFired checks, after an Execute of turn, that every command whose
// handler fired a fault of kind (a) had its settlement written: its entry
// is no longer Executing under the attempt that ran. It may have been
// superseded (its lease ended and another attempt took it over: at least
// once by design), or still be executing because its case kept moving
// (Execute's error says so); anything else is the hole of issue 11, item 2.
func (c *child) checkFired(ctx context.Context, turn turnframe.TurnID, execErr error) error {
	c.mu.Lock()
	mine := map[entryKey]firedFault{}
	for k, f := range c.fired {
		if f.turn == turn {
			mine[k] = f
			delete(c.fired, k)
		}
	}
	c.mu.Unlock()
	for k, f := range mine {
		e, err := c.store.ByKey(ctx, k.account, k.key)
		if err != nil {
			return fmt.Errorf("read %s after %s: %w", k.key, f.name, err)
		}
		switch {
		case e.Status == turnframe.JournalPending && slices.Contains(localKinds, e.Name):
			// A local command's commit is refused on an abandoned turn
			// (or lost to another process's run): nothing of it landed.
			seen("local_refused", "%s attempt %v after %s", k.key, f.attempt, f.name)
		case e.Attempt != f.attempt:
			seen("superseded", "%s attempt %v by %v", k.key, f.attempt, e.Attempt)
		case e.Status == turnframe.JournalExecuting && execErr != nil && strings.Contains(execErr.Error(), "moved from revision"):
			seen("case_kept_moving", "%s", k.key)
		case e.Status == turnframe.JournalExecuting:
			return fmt.Errorf("fault %s fired while %s ran (attempt %v), and its settlement did not land: the entry is still executing (Execute: %v)",
				f.name, k.key, f.attempt, execErr)
		default:
			fault(f.name+"_settled", "%v %s %v", turn, k.key, e.Status)
		}
	}
	return nil
}

// busyDuringSettlement is fault (b): once a send answered, hold the database's
// write lock past the dispatcher's busy timeout, so that the settlement
// the dispatcher is about to write is refused as busy. known says whether
// the send's outcome was known to the dispatcher (answered in time, and not
// retryable): such a row must never be sent again while its worker lives.
func (c *child) busyDuringSettlement(ctx context.Context, e turnframe.OutboxEntry, d turnframe.Dispatched) {
	if !c.faults || draw(c.seed, "busy", e.Account, e.Key, e.Attempts) >= busyPercent {
		return
	}
	hold := busyHoldMin + time.Duration(draw(c.seed, "hold", e.Account, e.Key, e.Attempts))*busyHoldSpread/100
	if !c.holdWriteLock(hold) {
		tally("busy_lock_missed", 1) // held already, or another writer had it
		return
	}
	known := ctx.Err() == nil && d.Kind != turnframe.DispatchRetryable
	fault("busy_lock", "%s %d %t %v %v", e.RemoteKey(), e.Attempts, known, d.Kind, hold)
}

// holdWriteLock takes the database's write lock (Backend.Locker) and lets
// it go after hold. It reports whether it took it.
func (c *child) holdWriteLock(hold time.Duration) bool {
	if c.locker == nil || !c.holding.CompareAndSwap(false, true) {
		return false
	}
	release, err := c.locker.Hold(c.ctx)
	if err != nil {
		c.holding.Store(false)
		return false
	}
	time.AfterFunc(hold, func() {
		release()
		c.holding.Store(false)
	})
	return true
}

// slowSweep draws whether a working child's next dispatch sweep is slow
// (fault c). Only a sweep with two rows or more to send is made slow: the
// second row's send ends after the lease it was claimed with.
func (c *child) slowSweep() (bool, error) {
	if !c.faults || c.role != "work" || draw(c.seed, "slow", c.worker, c.runs) >= slowPercent {
		return false, nil
	}
	rows, err := c.store.ListOutbox(c.ctx, turnframe.OutboxFilter{Status: turnframe.OutboxPending, Limit: 8})
	if err != nil {
		return false, err
	}
	now, due := time.Now(), 0
	for _, r := range rows {
		if !r.DueAt.After(now) {
			due++
		}
	}
	return due >= 2, nil
}

// observedOutbox is the dispatcher's store, passed through unchanged, with
// what the faults need to see counted: settlements and extensions refused
// as busy, claims lost, and rows settled after the lease they were claimed
// with had ended.
type observedOutbox struct {
	turnframe.Store

	mu       sync.Mutex
	leases   map[turnframe.OutboxID]time.Time // each claimed row's lease end, as claimed
	settling map[turnframe.OutboxID]bool      // rows whose settlement this process is writing or wrote
	cut      map[turnframe.OutboxID]bool      // rows a try of whose settlement was cut by its context: it may have committed unanswered
}

func (o *observedOutbox) ClaimDue(ctx context.Context, now time.Time, limit int, worker string, lease time.Duration) ([]turnframe.Claim, error) {
	claims, err := o.Store.ClaimDue(ctx, now, limit, worker, lease)
	if errors.Is(err, turnframe.ErrBusy) {
		tally("busy_claim", 1)
	}
	o.mu.Lock()
	for _, c := range claims {
		o.leases[c.ID] = c.LeaseUntil
	}
	o.mu.Unlock()
	return claims, err
}

func (o *observedOutbox) ExtendClaims(ctx context.Context, claims []turnframe.Claim, now time.Time, lease time.Duration) ([]error, error) {
	results, err := o.Store.ExtendClaims(ctx, claims, now, lease)
	switch {
	case errors.Is(err, turnframe.ErrBusy):
		tally("busy_extend", 1)
	case err == nil:
		extended := 0
		for i, rerr := range results {
			if rerr == nil {
				extended++
				continue
			}
			if !errors.Is(rerr, turnframe.ErrClaimLost) {
				continue
			}
			o.mu.Lock()
			ours := o.settling[claims[i].ID]
			o.mu.Unlock()
			if ours {
				// The sweep's own settler settled the row between the
				// keeper's look at the open rows and its extension: the
				// claim is gone because the row is settled, not expired.
				tally("extend_after_settle", 1)
				continue
			}
			tally("claim_lost_extend", 1)
			fmt.Fprintf(os.Stderr, "claim lost while extending row %v: %v\n", claims[i].ID, rerr)
		}
		tally("extended", extended)
	}
	return results, err
}

func (o *observedOutbox) Settle(ctx context.Context, settlements []turnframe.OutboxSettlement) ([]error, error) {
	o.mu.Lock()
	for _, s := range settlements {
		o.settling[s.Claim.ID] = true
	}
	o.mu.Unlock()
	results, err := o.Store.Settle(ctx, settlements)
	if err != nil && ctx.Err() != nil {
		// Cut by the end of the rows' leases (the sweep's pastCaller): on
		// PostgreSQL a COMMIT sent in one pipeline with a statement
		// waiting for the held table commits once the lock is let go,
		// after the client gave up on its answer. The dispatcher tells
		// that by the row's history (landed) when a later try is refused.
		o.mu.Lock()
		for _, s := range settlements {
			o.cut[s.Claim.ID] = true
		}
		o.mu.Unlock()
	}
	if errors.Is(err, turnframe.ErrBusy) && len(settlements) > 0 {
		// The row makes the line, and so the parent's kill draw, its own.
		fault("busy_settle", "%d rows, first %s attempt %d", len(settlements), settlements[0].Claim.RemoteKey(), settlements[0].Claim.Attempts)
		return results, err
	}
	if err != nil || len(results) != len(settlements) {
		return results, err
	}
	now := time.Now()
	for i, rerr := range results {
		id := settlements[i].Claim.ID
		o.mu.Lock()
		claimed, ok := o.leases[id]
		delete(o.leases, id)
		o.mu.Unlock()
		switch {
		case rerr == nil && ok && now.After(claimed):
			fault("lease_outlived", "%v by %v", id, now.Sub(claimed).Round(time.Millisecond))
		case errors.Is(rerr, turnframe.ErrClaimLost) && o.landedWhenCut(ctx, settlements[i]):
			tally("settle_landed_cut", 1) // an earlier, cut try committed it: the claim ended with it
		case errors.Is(rerr, turnframe.ErrClaimLost):
			tally("claim_lost_settle", 1)
			fmt.Fprintf(os.Stderr, "claim lost while settling row %v: %v\n", id, rerr)
		}
	}
	return results, err
}

// landedWhenCut reports whether s was refused because an earlier try of
// it, cut by its context, had committed: the row stands as s makes it,
// under s's own claim. Only a cut try may commit unanswered; a try refused
// busy wrote nothing, and a row of such a settlement found settled is
// still counted as a lost claim.
func (o *observedOutbox) landedWhenCut(ctx context.Context, s turnframe.OutboxSettlement) bool {
	o.mu.Lock()
	cut := o.cut[s.Claim.ID]
	o.mu.Unlock()
	if !cut {
		return false
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	r, err := o.Store.GetOutbox(rctx, s.Claim.ID)
	return err == nil && r.Status == s.To && r.ClaimedBy == s.Claim.Worker && r.Attempts == s.Claim.Attempts
}
