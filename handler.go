package turnframe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"
)

// Handler runs one admitted command against the application's domain and
// says how it ended. Runtime.Execute calls it once per attempt of a pending
// journal entry, and again with the case's new revision when its commit
// found the case moved.
//
// Honour the context. Execute calls Handle on a goroutine of its own under a
// context that carries the command timeout (WithCommandTimeout). An answer
// counts only if Handle returned it while that context was live. When Handle
// has not returned by the deadline, or returns after it — even a Handle that
// honours ctx with `<-ctx.Done(); return Reject(…)` — Execute records the
// command as outcome unknown (I15: it is never run again automatically, only
// reconciled) and moves on. Go cannot stop a goroutine from outside, so a
// Handle that ignores its context keeps running in its own goroutine until
// it returns, and its late answer is discarded unread: that goroutine is the
// one thing turnframe leaves running after a call returns. A Handle that
// panics is recorded outcome unknown too (it may have done its work before
// panicking); the panic is logged at error level and reported in the
// CommandResult, and does not escape Execute.
//
// Use call.Command.Key as the idempotency key towards any remote system the
// command reaches. A command resumed after a crash is handed to Handle again
// under the same key and a new attempt id (I14), and only the key lets the
// remote recognise the repeat. The key is unique per account, not globally;
// a remote several tenants share needs it qualified by call.Account.
//
// Handle must not write to the store itself: its events and outbox messages
// are written by Execute, in one transaction with the journal settlement and
// only if the case did not move since call.Revision. The application's own
// rows go in that transaction too: return Commit(…).With(writes).
type Handler interface {
	Handle(ctx context.Context, call Call) Outcome
}

// HandlerFunc adapts a function to a Handler.
type HandlerFunc func(ctx context.Context, call Call) Outcome

// Handle calls f(ctx, call).
func (f HandlerFunc) Handle(ctx context.Context, call Call) Outcome { return f(ctx, call) }

// Call is what a Handler is handed: one command of one turn, in one attempt,
// against one revision of its case.
type Call struct {
	Account AccountID
	Turn    TurnID // the turn that admitted the command
	Command Command
	// Attempt is the attempt this call belongs to; the journal entry is
	// Executing under it (a local command's stays Pending until its
	// settlement names it). A re-run after a revision conflict keeps it.
	Attempt AttemptID
	// Attempts counts the attempts started for this command, this one
	// included: more than 1 means an earlier attempt was cut short (a
	// crash, a cancelled context) and may have reached the remote. A local
	// command's runs that left nothing (a crash, a panic, a timeout: its
	// entry stayed Pending) are not counted.
	Attempts int
	// Revision is the revision of Command.Case when the handler was called.
	// A Commit is written only if the case is still at this revision.
	Revision CaseRevision
}

// OutcomeKind says how a handler call ended. The zero value is not an
// outcome: a Handler returning Outcome{} is a programming error.
type OutcomeKind uint8

const (
	outcomeUnset OutcomeKind = iota
	// OutcomeCommit: the command took effect; its events and outbox
	// messages are to be written with it. Made by Commit.
	OutcomeCommit
	// OutcomeReject: the command was refused and took no effect. Made by
	// Reject.
	OutcomeReject
	// OutcomeUnknown: the command left the process and no answer came
	// back; it may or may not have taken effect. Made by Unknown, and by
	// Execute for a handler that timed out or panicked.
	OutcomeUnknown
)

var outcomeNames = [...]string{"unset", "commit", "reject", "unknown"}

// String returns the kind in lower case ("commit", "reject", "unknown").
func (k OutcomeKind) String() string { return enumName(outcomeNames[:], int(k), "outcome") }

// Outcome is how one handler call ended: build it with Commit, Reject or
// Unknown. The zero Outcome is invalid.
type Outcome struct {
	kind      OutcomeKind
	events    []Event
	outbox    []OutboxMessage
	code      string
	remoteRef string
	app       AppWrites // a Commit's own writes of the application (With)
}

// Commit is the outcome of a command that took effect. events are appended to
// the command's case (every event's Case must be the command's Case, and
// events and msgs must keep within the Runtime's Limits, or Execute refuses
// the outcome with ErrInvalid and writes nothing); msgs are
// enqueued in the outbox under the command's key ("key" for one message,
// "key~1", "key~2", … for several: OutboxKey). Events, msgs and the Committed journal
// entry are written in one transaction, so an outbox row exists if and only
// if the command committed. events and msgs are copied; the caller may reuse
// them.
func Commit(events []Event, msgs ...OutboxMessage) Outcome {
	return Outcome{kind: OutcomeCommit, events: cloneEvents(events), outbox: cloneMessages(msgs)}
}

// cloneEvents copies events and the data each holds: an Outcome shares no
// memory with its caller.
func cloneEvents(events []Event) []Event {
	events = slices.Clone(events)
	for i := range events {
		events[i].Data = bytes.Clone(events[i].Data)
	}
	return events
}

// cloneMessages copies msgs and the payload each holds.
func cloneMessages(msgs []OutboxMessage) []OutboxMessage {
	msgs = slices.Clone(msgs)
	for i := range msgs {
		msgs[i].Payload = bytes.Clone(msgs[i].Payload)
	}
	return msgs
}

// Reject is the outcome of a command the domain refused: it took no effect.
// code (at most 200 bytes of UTF-8; may be empty) says why and is kept on
// the journal entry; a code no store keeps, or a decision's, is replaced by
// CodeInvalidRejectCode (and logged), so the rejection is still recorded.
func Reject(code string) Outcome { return Outcome{kind: OutcomeReject, code: code} }

// CodeInvalidRejectCode replaces the code of a handler's Reject that no
// store keeps (over 200 bytes, not UTF-8, a NUL byte), or that is a
// decision's (CodeApproved, CodeDenied: a command that ran was not denied).
const CodeInvalidRejectCode = "turnframe.handler.invalid_code"

// Unknown is the outcome of a command that reached a remote system and got no
// answer: it may or may not have taken effect. remoteRef (at most 1024 bytes;
// may be empty) is whatever reference the remote gave, for reconciliation.
// The command is never run again automatically (I15); settle it with
// Recovery.Settle once the remote's answer is known, or by the policy of
// its command's Remote (Recovery.Recover).
func Unknown(remoteRef string) Outcome { return Outcome{kind: OutcomeUnknown, remoteRef: remoteRef} }

// Kind returns how the call ended.
func (o Outcome) Kind() OutcomeKind { return o.kind }

// Events returns a Commit's events (nil for other outcomes).
func (o Outcome) Events() []Event { return cloneEvents(o.events) }

// Outbox returns a Commit's outbox messages (nil for other outcomes).
func (o Outcome) Outbox() []OutboxMessage { return cloneMessages(o.outbox) }

// Code returns a Reject's code.
func (o Outcome) Code() string { return o.code }

// RemoteRef returns an Unknown's remote reference.
func (o Outcome) RemoteRef() string { return o.remoteRef }

// handlerEnd is how one handler call ended, as Execute records it.
type handlerEnd struct {
	ran   bool // the handler was called (even if the caller's context ended before it answered)
	out   Outcome
	cause string // "handler", "timeout" or "panic": who made the outcome
	panic any    // cause "panic": the value
	stack []byte // cause "panic": where
}

// callHandler runs h through callWithin under the command timeout and emits
// SignalCommandDuration for the call. It returns the handler's outcome, or
// Unknown with the cause "timeout" (the handler answered after its
// deadline, or not at all) or "panic"; or the caller's context error when
// ctx itself ended first (then it emits nothing). local says the call is a
// local command's (WithLocalCommand), whose timeout or panic leaves its
// entry pending rather than unknown: the log says which.
func (rt *Runtime) callHandler(ctx context.Context, h Handler, call Call, local bool) (handlerEnd, error) {
	late := func(b bounded[Outcome]) {
		note := "the handler answered after its deadline: " + b.value.kind.String()
		if b.end == callPanicked {
			note = fmt.Sprintf("the handler panicked after its deadline: %v", b.panic)
		}
		note += " (attempt " + call.Attempt.String() + ")"
		recordLateAnswer(ctx, rt.store, rt.obs, rt.cfg.now(), JournalSubject(call.Account, call.Command.Key), ActorApp, b.value.remoteRef, note)
	}
	start := rt.cfg.clock()
	r := callWithin(ctx, rt.cfg.commandTimeout, func(hctx context.Context) Outcome { return h.Handle(hctx, call) }, late)
	elapsed := rt.cfg.clock().Sub(start)
	attrs := []slog.Attr{slog.String("key", string(call.Command.Key)), slog.String("attempt", call.Attempt.String())}
	consequence := "its outcome is unknown"
	if local {
		consequence = "it is a local command: its entry stays pending, to run again"
	}
	timed := func(outcome string) {
		rt.obs.timed(SignalCommandDuration, Labels{Command: call.Command.Name, Outcome: outcome}, elapsed)
	}
	switch r.end {
	case callTimedOut:
		if err := ctx.Err(); err != nil {
			return handlerEnd{ran: true}, err
		}
		timed("timeout")
		rt.obs.logf(ctx, slog.LevelWarn, "turnframe: command did not answer within its timeout; "+consequence,
			append(attrs, slog.Duration("timeout", rt.cfg.commandTimeout))...)
		return handlerEnd{ran: true, out: Unknown(""), cause: "timeout"}, nil
	case callPanicked:
		timed("panic")
		rt.obs.logf(ctx, slog.LevelError, "turnframe: command handler panicked; "+consequence,
			append(attrs, slog.Any("panic", r.panic), slog.String("stack", string(r.stack)))...)
		return handlerEnd{ran: true, out: Unknown(""), cause: "panic", panic: r.panic, stack: r.stack}, nil
	}
	timed(r.value.kind.String())
	return handlerEnd{ran: true, out: r.value, cause: "handler"}, nil
}

// ExecuteReport is what one Runtime.Execute did.
type ExecuteReport struct {
	// Phase is the turn's phase when Execute returned: PhaseCommitted once
	// nothing is left pending, unless the turn was already past it.
	Phase TurnPhase
	// Results has one element per journal entry of the turn, in admission
	// order, including the ones Execute did not run.
	Results []CommandResult
}

// CommandResult is what became of one journal entry in one Execute.
type CommandResult struct {
	Key     IdempotencyKey
	Command string // the command's name
	Kind    ResultKind
	// Ran reports whether this Execute called the handler for it.
	Ran bool
	// Status is the entry's journal status as Execute left it.
	Status JournalStatus
	// Attempt is the entry's current or last attempt: for ResultUnknown,
	// the attempt whose outcome is unknown.
	Attempt AttemptID
	// EventIDs are the events it committed (ResultCommitted, or a skipped
	// Committed entry).
	EventIDs []EventID
	// OutboxIDs are the outbox rows its commit enqueued, in order
	// (ResultCommitted only: Execute does not read back the rows of an
	// entry committed before).
	OutboxIDs []OutboxID
	Code      string // Rejected: the reason code
	RemoteRef string // OutcomeUnknown: the remote's reference, if any
	// Panic is, for a ResultUnknown this Execute's handler call caused by
	// panicking, the value it panicked with, and Stack where; both are
	// also logged at error level. Nil otherwise.
	Panic any
	Stack []byte
}

// ResultKind classifies a CommandResult.
type ResultKind uint8

const (
	resultUnset ResultKind = iota
	// ResultCommitted: this Execute ran the command and committed it, with
	// its events and outbox rows.
	ResultCommitted
	// ResultRejected: this Execute ran the command and the handler rejected
	// it.
	ResultRejected
	// ResultUnknown: the command's outcome is unknown, because this
	// Execute's attempt timed out, panicked or was reported unknown by the
	// handler (Ran is true), or because an earlier attempt left it so (Ran is
	// false: it was not run again, I15), or because its attempt died and
	// its command's Remote forbids running it again blindly (Code is
	// CodeLeaseEnded). Status says whether it is OutcomeUnknown or already
	// NeedsIntervention. Recovery.Recover resolves it by the policy of its
	// command's Remote; Recovery.Settle settles it by hand.
	ResultUnknown
	// ResultSkipped: the command was already Committed or Rejected before
	// this Execute (Status says which), and was not run again (I14).
	ResultSkipped
	// ResultPending: the command is still pending, because Execute stopped
	// with an error at it or before it, or before an entry in flight
	// elsewhere, or because another caller put it back to Pending while
	// this Execute was at it (a reconciliation's resend): Execute stops
	// there too, so no later command runs ahead of it. A later Execute runs
	// it.
	ResultPending
	// ResultInFlight: another attempt — another Execute, in this process or
	// another — holds the command under a lease that has not ended, so this
	// Execute did not run it, and stopped there (the turn's commands run in
	// admission order): the pending entries after it are ResultPending. Not an
	// error: the holder settles it, or once its lease ends a later Execute
	// takes it over.
	ResultInFlight
	// ResultAwaitingApproval: the command waits for Runtime.Approve or
	// Runtime.Deny (Status is JournalAwaitingApproval). Execute did not run
	// it and went on with the entries after it; an Execute after the
	// approval runs it.
	ResultAwaitingApproval
)

var resultNames = [...]string{"unset", "committed", "rejected", "unknown", "skipped", "pending", "in_flight", "awaiting_approval"}

// String returns the kind in lower case ("committed", "skipped", …).
func (k ResultKind) String() string { return enumName(resultNames[:], int(k), "result") }

// ranResult is resultOf(e) for an entry whose handler this Execute may
// have called: Ran is ran, whether it did (on any pass of a re-run),
// whatever became of its outcome after.
func ranResult(e JournalEntry, ran bool) CommandResult {
	r := resultOf(e)
	r.Ran = ran
	return r
}

// resultOf reports e as it stands, not run by this Execute.
func resultOf(e JournalEntry) CommandResult {
	r := CommandResult{
		Key: e.Key, Command: e.Name, Status: e.Status, Attempt: e.Attempt,
		EventIDs: e.EventIDs, Code: e.Code, RemoteRef: e.RemoteRef,
	}
	switch {
	case e.Status.IsSettled():
		r.Kind = ResultSkipped
	case e.Status.IsUncertain():
		r.Kind = ResultUnknown
	case e.Status.IsAwaitingApproval():
		r.Kind = ResultAwaitingApproval
	default:
		r.Kind = ResultPending
	}
	return r
}

// inFlight reports e, Executing under another attempt that may still be
// running it, as ResultInFlight.
func inFlight(e JournalEntry) CommandResult {
	r := resultOf(e)
	r.Kind = ResultInFlight
	return r
}

// execution is one Runtime.Execute of one turn: the phase it has seen the
// turn reach, and the handler it runs commands through.
type execution struct {
	rt      *Runtime
	account AccountID
	turn    TurnID
	phase   TurnPhase
	h       Handler
	// last says whether no entry after the one running was pending when
	// Execute read the turn: only then does its settlement ask the store
	// to advance the turn to Committed (which costs the store a count of
	// the turn's pending entries). The store judges by the entries as they
	// are: a move it refuses is skipped, and one this Execute did not ask
	// for is made by Deliver.
	last bool
}

// takeTries bounds how often run tries to take an entry whose attempt moved
// under it (another caller took it, and its lease ended already).
const takeTries = 3

// run takes one pending entry through an attempt: take it (one Apply), call
// the handler, settle its outcome (one Apply), re-running the handler when a
// commit finds its case moved. An entry another attempt holds is reported
// ResultInFlight; one that settled elsewhere meanwhile is reported as it is.
func (x *execution) run(ctx context.Context, e JournalEntry) (CommandResult, error) {
	if now := x.rt.cfg.now(); e.Status == JournalExecuting && x.rt.cfg.takeOverForbidden(e, now) {
		if e.LeaseUntil.After(now) {
			return inFlight(e), nil // no take: it could land once the store's clock says the lease ended
		}
		return x.declareUnknown(ctx, e)
	}
	if x.rt.cfg.resendLapsed(e, x.rt.cfg.now()) {
		return x.withholdResend(ctx, e)
	}
	if e.Status == JournalPending && x.rt.cfg.local[e.Name] {
		return x.runLocal(ctx, e)
	}
	// The revision the first call is given is read before the take: a
	// read failing after it would leave the entry held by an attempt that
	// never called its handler — in flight to every Execute until its
	// lease ended, and then, for a command whose Remote forbids a blind
	// rerun, declared unknown though it never ran. A case moving between
	// this read and the commit is a conflict, as one moving during the
	// call is.
	rev, err := x.revision(ctx, e.Case)
	if err != nil {
		return resultOf(e), err
	}
	running, taken, res, err := x.take(ctx, e)
	if !taken {
		return res, err
	}
	rt := x.rt
	ran := false // the handler was called, on this pass or an earlier one
	since := keySince(e, running)
	for reruns := 0; ; reruns++ {
		judged := since // zero: the remote cannot have the key before this call
		if since.IsZero() {
			since = rt.cfg.now() // the remote can have the key from this call on
		}
		if running.LeaseUntil.Before(rt.cfg.now().Add(rt.cfg.commandTimeout)) {
			// The call would outlive the lease (the process was slow
			// since the take): hold the entry for the whole call first.
			if running, err = x.renew(ctx, running); err != nil {
				if !ran {
					return x.putBack(ctx, e, running, err)
				}
				return ranResult(running, ran), err
			}
		}
		if reruns > 0 { // the case moved under the last call: its revision now
			if rev, err = x.revision(ctx, running.Case); err != nil {
				return ranResult(running, ran), err
			}
		}
		keeper := x.keepAttempt(ctx, running)
		end, err := x.callInWindow(ctx, running, rev, judged, reruns > 0)
		var leaseEnd time.Time // on the real clock
		running, leaseEnd = keeper.end()
		ran = ran || end.ran
		switch {
		case errors.Is(err, errNotCalled):
			return x.putBack(ctx, e, running, ctx.Err())
		case errors.Is(err, errLateCall):
			return x.withhold(ctx, running, ran, CodeKeyForgotten, withheldCallNote)
		case errors.Is(err, errBlindRerun):
			return x.withhold(ctx, running, ran, CodeRerunWithheld, withheldRerunNote)
		}
		if err != nil {
			return ranResult(running, ran), err
		}
		w, err := x.settlement(ctx, running, Settlement{Key: running.Key, Attempt: running.Attempt}, rev, end.out)
		if err != nil {
			return ranResult(running, ran), err
		}
		applied, err := x.record(ctx, running, leaseEnd, w)
		if err == nil {
			x.phase = applied.Phase
			return x.settled(ctx, applied, end), nil
		}
		if end.out.kind != OutcomeCommit || !errors.Is(err, ErrConflict) || errors.As(err, new(adoptedError)) {
			x.unrecorded(ctx, running, end, err)
			return ranResult(running, ran), fmt.Errorf("settle %v: %w", end.out.kind, err)
		}
		// A conflict on a commit: re-run only if it is the case that moved,
		// not a refused transition. If another Runtime took the entry over
		// (its own attempt, or already settled), the command is its business.
		again, err := x.rerunnable(ctx, running, rev, reruns, err)
		if err != nil {
			return ranResult(again, ran), err
		}
		running = again
	}
}

// record writes w, the settlement of running's attempt. The outcome is
// known to this attempt alone, so it is written as a dispatcher writes a
// settlement: even after ctx ended, and again with backoff (settleRetryFirst
// doubling to settleRetryMax) while the store refuses it as ErrBusy and the
// attempt's lease lasts. Given up, the entry stays Executing under an
// attempt nobody runs, and once its lease ended the next Execute takes it
// over (at least once, or declared unknown by its Remote): so it is given
// up only when that may happen anyway, or when the store is closed or
// fails otherwise. Each try is bounded by what is left of the lease (at
// least settleRetryMax): with ctx's cancellation gone, a write waiting for
// a lock another session holds (an app's open ApplyTx) would otherwise
// wait for ever. What is left is read on the real clock, where the lease
// ends at end (the keeper's reading), and a forward step of the wall clock
// between tries is followed (follow): the step does not end the lease, or
// a commit that happened would be given up and run again.
func (x *execution) record(ctx context.Context, running JournalEntry, end time.Time, w Write) (Applied, error) {
	rt := x.rt
	for wait := settleRetryFirst; ; wait = min(2*wait, settleRetryMax) {
		lasts := x.lasts(running, end)
		tctx, cancel := pastCaller(ctx, lasts, time.Now())
		applied, err := rt.store.Apply(tctx, w)
		ended := tctx.Err() != nil
		cancel()
		// The read that tells an adoption from a missing turn outlives
		// the caller as the write did: on an ended ctx it fails, and the
		// refusal would stay ErrNotFound.
		actx, acancel := pastCaller(ctx, lasts, time.Now())
		adopted := x.adoptedAway(actx, running.Key, err)
		acancel()
		if adopted != nil {
			return applied, adopted
		}
		if err != nil && ended {
			return applied, fmt.Errorf("the attempt's lease ran out while its outcome waited to be written: %w", err)
		}
		if err == nil || !errors.Is(err, ErrBusy) || errors.Is(err, ErrClosed) || time.Until(lasts) <= wait {
			return applied, err
		}
		rt.obs.logf(ctx, slog.LevelWarn, "turnframe: store busy; the command's outcome will be written again",
			slog.String("key", string(running.Key)), slog.String("attempt", running.Attempt.String()),
			slog.Duration("wait", wait), slog.String("error", err.Error()))
		t := time.NewTimer(wait)
		<-t.C
		running = x.follow(ctx, running, end)
	}
}

// lasts returns the instant, on the real clock, until which running's
// attempt holds its entry: end, where its lease ends on the real clock, or
// later if the wall clock stepped back meanwhile, for the lease is judged
// on the wall clock (by the store, Recover and every Execute), and no one
// takes the attempt over before it ends there. Giving its outcome up
// sooner would drop a commit that could still land, and the command would
// run again once the lease ended.
func (x *execution) lasts(running JournalEntry, end time.Time) time.Time {
	if wall := time.Now().Add(running.LeaseUntil.Sub(x.rt.cfg.now())); wall.After(end) {
		return wall
	}
	return end
}

// follow renews the lease of running's attempt, whose outcome is being
// written, to end, where it ends on the real clock, when a forward step of
// the wall clock (more than stepCheck) brought it within half a lease
// margin: a release or another Execute would take the attempt over while
// its outcome is written, and run the command again. It never renews
// further, so the outcome's writes stay bounded by the lease taken before
// the call. Refused, it changes nothing: the outcome's next try answers
// for the entry.
func (x *execution) follow(ctx context.Context, running JournalEntry, end time.Time) JournalEntry {
	rt := x.rt
	now, left := rt.cfg.now(), time.Until(end)
	if running.LeaseUntil.After(now.Add(rt.cfg.leaseMargin/2)) || now.Add(left).Sub(running.LeaseUntil) <= stepCheck {
		return running
	}
	tctx, cancel := pastCaller(ctx, end, time.Now())
	defer cancel()
	renewed, err := x.renewFor(tctx, running, left)
	if err != nil {
		return running
	}
	return renewed
}

// call reads the revision of cmd's case and calls the handler for it under
// attempt, the attempts-th of the command, against that revision. local
// says it is a local command's call (callHandler). The error is the read's,
// or the caller's context's.
func (x *execution) call(ctx context.Context, cmd Command, attempt AttemptID, attempts int, local bool) (CaseRevision, handlerEnd, error) {
	rev, err := x.revision(ctx, cmd.Case)
	if err != nil {
		return 0, handlerEnd{}, err
	}
	end, err := x.callAt(ctx, cmd, attempt, attempts, rev, local)
	return rev, end, err
}

// revision reads the revision of case c.
func (x *execution) revision(ctx context.Context, c CaseKey) (CaseRevision, error) {
	rev, err := x.rt.store.CaseRevision(ctx, x.account, c)
	if err != nil {
		return 0, fmt.Errorf("read revision of case %q: %w", c, err)
	}
	return rev, nil
}

// callAt calls the handler for cmd under attempt, the attempts-th of the
// command, against rev, the revision of its case read before; local as
// for call. The error is the caller's context's.
func (x *execution) callAt(ctx context.Context, cmd Command, attempt AttemptID, attempts int, rev CaseRevision, local bool) (handlerEnd, error) {
	return x.rt.callHandler(ctx, x.h, Call{
		Account: x.account, Turn: x.turn, Command: cmd, Attempt: attempt, Attempts: attempts, Revision: rev,
	}, local)
}

// errLateCall is callInWindow's refusal of a call that could reach its
// remote only after it forgets the key.
var errLateCall = errors.New("the call would reach its remote after it forgets the key")

// errNotCalled is callInWindow's refusal of an attempt's first call once
// the caller's context ended: the handler is not started.
var errNotCalled = errors.New("the caller's context ended before the handler was called")

// putBack answers an attempt whose first call was never made, the caller's
// context having ended, or the renewal its call needed having failed (why):
// running's entry, which this Execute took from Pending as e, is put back
// to Pending under e's code (a resend of the policy's stays one, for the
// window's rule), the attempt uncounted, so that the next Execute runs it
// as if it had never been taken — not, at a Remote that forbids a blind
// rerun, declared unknown once the lease ended and handed to a person
// though nothing was sent. The write is made past the caller, for
// settleRetryMax at most. An entry taken over from a dead attempt (e was
// Executing, or the take met another attempt's move) is not put back: its
// dead attempt may have called out. Nor is one whose turn was abandoned
// since the take: the store refuses it (storekit), Pending there running
// in no turn. Refused or failed, the entry stays held, as before, until
// its lease ends. The error is why.
func (x *execution) putBack(ctx context.Context, e, running JournalEntry, why error) (CommandResult, error) {
	if e.Status != JournalPending || running.Attempts != e.Attempts+1 {
		return ranResult(running, false), why
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleRetryMax)
	defer cancel()
	applied, err := x.rt.store.Apply(pctx, Write{
		Account: x.account, Turn: x.turn, Now: x.rt.cfg.now(),
		Note:   "attempt " + running.Attempt.String() + " took the entry but never called its handler: put back",
		Settle: []Settlement{{Key: running.Key, To: JournalPending, Attempt: running.Attempt, Code: e.Code}},
	})
	if err != nil {
		x.rt.obs.logf(ctx, slog.LevelWarn, "turnframe: an attempt that never called its handler could not be put back; its entry stays held until its lease ends",
			slog.String("key", string(running.Key)), slog.String("attempt", running.Attempt.String()), slog.String("error", err.Error()))
		return ranResult(running, false), why
	}
	x.phase = applied.Phase
	return ranResult(applied.Settled[0], false), why
}

// errBlindRerun is callInWindow's refusal of a re-run after a commit
// conflict at a remote declared not to deduplicate.
var errBlindRerun = errors.New("the re-run would repeat its request at a remote that does not deduplicate")

// callInWindow calls the handler for running's attempt against rev, the
// revision of its case read before, whose remote may hold the key since
// since (zero: it cannot hold it yet, and nothing is judged), with the
// window judged (settings.callInWindow) just before the call: every store
// call before it (the revision's read, a renewal) may have been slow.
// errLateCall, the handler not called, when the call could arrive too
// late. rerun says the call is a re-run after a commit conflict, which
// repeats a request the first call made: errBlindRerun, the handler not
// called, when its command is declared a remote that does not deduplicate
// (settings.rerunBlind).
func (x *execution) callInWindow(ctx context.Context, running JournalEntry, rev CaseRevision, since time.Time, rerun bool) (handlerEnd, error) {
	switch {
	case !rerun && ctx.Err() != nil:
		return handlerEnd{}, errNotCalled
	case rerun && x.rt.cfg.rerunBlind(running.Name):
		return handlerEnd{}, errBlindRerun
	case !since.IsZero() && !x.rt.cfg.callInWindow(running.Name, since, x.rt.cfg.now()):
		return handlerEnd{}, errLateCall
	}
	return x.callAt(ctx, running.Command, running.Attempt, running.Attempts, rev, false)
}

// withholdResend answers a resend taken up after its remote forgot the key,
// or whose command is declared now a remote that does not deduplicate
// (resendLapsed): the earlier attempt's outcome is still unknown, and a
// send now would be blind. It takes the entry, the one move out of
// Pending, and records its outcome unknown again at once, CodeKeyForgotten,
// without calling the handler; the policy (Recovery.Recover) then escalates
// it. A crash between the two writes leaves an attempt that dies with its
// lease, and a dead attempt of such a remote past its window is declared
// unknown (settings.rerunForbidden), never run.
func (x *execution) withholdResend(ctx context.Context, e JournalEntry) (CommandResult, error) {
	running, taken, res, err := x.take(ctx, e)
	if !taken {
		return res, err
	}
	return x.withhold(ctx, running, false, CodeKeyForgotten, "a resend allowed while the remote remembered the key was taken up too late to reach it before it forgets it, or its command is declared now a remote that does not deduplicate: withheld, the handler not called")
}

// withheldCallNote is what the audit trail says of a handler call run
// withheld after its attempt took the entry (callInWindow).
const withheldCallNote = "a call repeating a request the remote may have had would reach it only after it forgets the key: withheld, the handler not called"

// withheldRerunNote is what the audit trail says of a re-run after a
// commit conflict withheld at a remote that does not deduplicate
// (callInWindow, errBlindRerun).
const withheldRerunNote = "the case moved under the command's commit, and its re-run would repeat the request at a remote declared not to deduplicate: withheld, the handler not called again; the first call may have acted"

// keySince returns since when the remote of running's command may hold its
// key from a request whose outcome is in doubt, as this attempt starts:
// the command's admission when the attempt took over a dead one (e was
// Executing), took up the policy's resend (e was Pending, CodeResent), or
// took an entry another attempt moved after e was read (running is more
// than one attempt past e). Otherwise zero: the remote cannot have had the
// key before this attempt's first call (or a person chose to resend it).
func keySince(e, running JournalEntry) time.Time {
	if e.Status == JournalExecuting || e.Code == CodeResent || running.Attempts > e.Attempts+1 {
		return running.AdmittedAt
	}
	return time.Time{}
}

// withhold settles running, the attempt this Execute took, unknown with
// code as the policy's move with note, without calling the handler
// (again): its call could reach a remote that deduplicates after it
// forgot the key (CodeKeyForgotten), or repeat a request at one that does
// not deduplicate (CodeRerunWithheld). ran says whether the handler was
// called on an earlier pass. The policy (Recovery.Recover) then resolves
// it by the command's Remote.
func (x *execution) withhold(ctx context.Context, running JournalEntry, ran bool, code, note string) (CommandResult, error) {
	w, err := x.settlement(ctx, running, Settlement{Key: running.Key, Attempt: running.Attempt, Code: code}, 0, Unknown(""))
	if err != nil {
		return ranResult(running, ran), err
	}
	w.Actor, w.Note = ActorPolicy, note
	applied, err := x.rt.store.Apply(ctx, w)
	if err != nil {
		if adopted := x.adoptedAway(ctx, running.Key, err); adopted != nil {
			err = adopted
		}
		return ranResult(running, ran), fmt.Errorf("withhold a lapsed resend: %w", err)
	}
	x.phase = applied.Phase
	// A new unknown, counted as every other is (the Dispatcher's withhold
	// of a row too): the policy's settlement of it counts a reconciliation.
	x.rt.obs.count(SignalExternalOutcomeUnknown, Labels{Command: running.Name, Outcome: code})
	x.rt.obs.logf(ctx, slog.LevelWarn, "turnframe: a call repeating a request its remote could not recognise was withheld; its outcome stays unknown for the policy",
		slog.String("key", string(running.Key)), slog.String("attempt", running.Attempt.String()), slog.String("code", code))
	return ranResult(applied.Settled[0], ran), nil
}

// declareUnknown records that e's dead attempt may have acted: the entry
// becomes OutcomeUnknown with CodeLeaseEnded, for the policy of its Remote
// (Recovery.Recover) to resolve. Another caller that moved the entry first
// wins; the entry is then reported as it is — ResultInFlight while it is
// still Executing, under a new attempt or under the one whose lease the
// store (on its own clock) judged still running, and ResultPending when a
// reconciliation put it back to Pending; Execute stops at either.
func (x *execution) declareUnknown(ctx context.Context, e JournalEntry) (CommandResult, error) {
	rt := x.rt
	applied, err := rt.store.Apply(ctx, Write{
		Account: x.account, Turn: x.turn, Actor: ActorRecovery, Now: rt.cfg.now(),
		Note:   "attempt " + e.Attempt.String() + " died (its lease ended) and its command's Remote does not allow running it again blindly",
		Settle: []Settlement{{Key: e.Key, To: JournalOutcomeUnknown, Code: CodeLeaseEnded, Prior: e.Attempt}},
	})
	if err != nil {
		if adopted := x.adoptedAway(ctx, e.Key, err); adopted != nil {
			return resultOf(e), fmt.Errorf("declare a dead attempt unknown: %w", adopted)
		}
		if !errors.Is(err, ErrConflict) {
			return resultOf(e), fmt.Errorf("declare a dead attempt unknown: %w", err)
		}
		seen, rerr := rt.store.ByKey(ctx, x.account, e.Key)
		if rerr != nil {
			// Another caller moving the entry first is no error; only the
			// read would tell, and it failed (ErrBusy: try again).
			return resultOf(e), fmt.Errorf("declare a dead attempt unknown: %w (reading the entry again, after the store refused the declaration: %v)", rerr, err)
		}
		if seen.Status == JournalExecuting {
			return inFlight(seen), nil
		}
		return resultOf(seen), nil
	}
	x.phase = applied.Phase
	rt.obs.count(SignalExternalOutcomeUnknown, deadAttemptLabels(e.Name))
	rt.obs.logf(ctx, slog.LevelWarn, "turnframe: a command's attempt died; its outcome is unknown and goes to its Remote's policy",
		slog.String("key", string(e.Key)), slog.String("attempt", e.Attempt.String()))
	return resultOf(applied.Settled[0]), nil
}

// take moves e to Executing for a new attempt of this Execute: a
// compare-and-set on the attempt e was read under, leased for the command
// timeout and the lease margin. When the store refuses it, the entry is read
// again: held by a live attempt elsewhere (by this runtime's clock, or by
// the store's: refusedTake), it is reported ResultInFlight;
// settled meanwhile, as it is; taken and abandoned by a caller that died, it
// is taken again (at most takeTries times) — unless its command's Remote
// forbids running a dead attempt again (settings.rerunForbidden, judged at
// the same reading of the clock as the lease): it is then declared
// unknown, as run declares one it lists. A resend the policy made
// meanwhile whose remote has forgotten the key since (resendLapsed) is not
// taken: it is reported pending, for the next pass to withhold. When taken is false, res reports
// the entry and err says why it was not taken, if that is an error.
func (x *execution) take(ctx context.Context, e JournalEntry) (running JournalEntry, taken bool, res CommandResult, err error) {
	rt := x.rt
	for try := 1; ; try++ {
		now := rt.cfg.now()
		take := Settlement{Key: e.Key, To: JournalExecuting, Attempt: rt.cfg.ids.AttemptID(now), Prior: e.Attempt, Lease: rt.cfg.commandLease()}
		if rt.cfg.takeOverForbidden(e, now) {
			// The store holds the rule too, in its own transaction and on
			// its own clock: this take moves the entry from Pending only,
			// never over an attempt that holds it, live or dead.
			take.From = JournalPending
		}
		w := Write{Account: x.account, Turn: x.turn, Now: now, Settle: []Settlement{take}}
		if x.phase < PhaseExecuting {
			w.Advance = PhaseExecuting
		}
		applied, err := rt.store.Apply(ctx, w)
		if err == nil {
			x.phase = applied.Phase
			return applied.Settled[0], true, CommandResult{}, nil
		}
		if adopted := x.adoptedAway(ctx, e.Key, err); adopted != nil {
			return e, false, resultOf(e), fmt.Errorf("take for a new attempt: %w", adopted)
		}
		if !errors.Is(err, ErrConflict) {
			return e, false, resultOf(e), fmt.Errorf("take for a new attempt: %w", err)
		}
		seen, rerr := rt.store.ByKey(ctx, x.account, e.Key)
		if rerr != nil {
			// A take refused is another caller having moved the entry,
			// which is no error: only the read says what became of it,
			// and the read failed (ErrBusy: try again).
			return e, false, resultOf(e), fmt.Errorf("take for a new attempt: %w (reading the entry again, after the store refused the take: %v)", rerr, err)
		}
		// One reading judges both the lease and the Remote's rule: two
		// could disagree (a wall clock stepped back between them) and let
		// a take go out for an entry of a remote that forbids one.
		now = rt.cfg.now()
		switch {
		case seen.Status == JournalExecuting && seen.LeaseUntil.After(now):
			return seen, false, inFlight(seen), nil
		case !seen.Status.IsPending():
			return seen, false, resultOf(seen), nil // settled elsewhere meanwhile
		case seen.Status == JournalExecuting && seen.Attempt == e.Attempt:
			return x.refusedTake(ctx, seen, err)
		case seen.Attempt == e.Attempt || try == takeTries:
			return seen, false, resultOf(seen), fmt.Errorf("take for a new attempt: %w", err)
		case rt.cfg.rerunForbidden(seen, now):
			// Another caller took it meanwhile and died: its attempt may
			// have acted, judged as run judges the entry it listed.
			res, err := x.declareUnknown(ctx, seen)
			return seen, false, res, err
		case rt.cfg.resendLapsed(seen, now):
			// The policy resent it meanwhile, and the remote has forgotten
			// the key since: taken now it would run blind. It stays
			// Pending, and the next pass withholds it (withholdResend).
			return seen, false, resultOf(seen), nil
		}
		e = seen
	}
}

// adoptedAway tells whether refusal, the store's ErrNotFound for a write
// about key's entry in this Execute's turn (a take, a declaration, a
// renewal, an outcome), is a new turn's plan having adopted the entry
// (this turn was abandoned meanwhile: before the take, or, for a process
// whose clock ran ahead of this one's, while the handler ran): the entry
// exists, so it returns the conflict that is, as localRefused reports it —
// ErrNotFound would say the turn does not exist, or is another tenant's,
// and the attempt's keeper would take it for a renewal to try again rather
// than an entry lost. For any other refusal, or none, it returns nil.
func (x *execution) adoptedAway(ctx context.Context, key IdempotencyKey, refusal error) error {
	by, ok, err := adoptedBy(ctx, x.rt.store, x.account, key, x.turn, refusal)
	if err != nil {
		return err
	}
	if !ok {
		return nil
	}
	return adoptedError{fmt.Errorf("%w: the turn was abandoned and turn %v adopted the command; nothing was written (%v)", ErrConflict, by, refusal)}
}

// adoptedBy returns the turn that adopted the entry account admitted under
// key, when refusal is the store's ErrNotFound for a write naming turn and
// the entry, read again, is now another turn's: a new turn's plan adopted
// it from turn, abandoned meanwhile. ok is false for any other refusal, or
// none. When the read fails after a not-found refusal, err is that read's
// error: the caller read the turn and the entry before its write, so
// ErrNotFound would say that one of them does not exist, and what is known
// is only that the read failed.
func adoptedBy(ctx context.Context, store Store, account AccountID, key IdempotencyKey, turn TurnID, refusal error) (by TurnID, ok bool, err error) {
	if !errors.Is(refusal, ErrNotFound) {
		return TurnID{}, false, nil
	}
	seen, rerr := store.ByKey(ctx, account, key)
	switch {
	case rerr != nil:
		return TurnID{}, false, fmt.Errorf("%w (reading the entry again, after the store found it no longer in turn %v: %v)", rerr, turn, refusal)
	case seen.Turn == turn:
		return TurnID{}, false, nil
	}
	return seen.Turn, true, nil
}

// adoptedError is adoptedAway's conflict: the entry is another turn's, so
// no re-run of this turn's attempt can write its outcome.
type adoptedError struct{ error }

func (e adoptedError) Unwrap() error { return e.error }

// refusedTake reports an entry whose take the store refused although it is
// still Executing under the attempt the take named. The store refuses such
// a take only for an abandoned turn (an error, as before any take) or for a
// lease it judged still running, on its own clock — which may disagree with
// this runtime's by the time the entry was read again: the lease ending
// just then, or a store measuring leases on the database's clock
// (pgstore.DatabaseClock). The store's judgement wins: the entry is
// reported ResultInFlight, and a later Execute takes it over. A failed
// read of the turn returns that read's error, not the refusal.
func (x *execution) refusedTake(ctx context.Context, seen JournalEntry, refusal error) (JournalEntry, bool, CommandResult, error) {
	marker, err := x.rt.store.TurnPhase(ctx, x.account, x.turn)
	if err != nil {
		// Abandoned (a conflict) or a lease still running on the store's
		// clock (no error): only the read would tell, and it failed
		// (ErrBusy: try again).
		return seen, false, resultOf(seen), fmt.Errorf("take for a new attempt: %w (reading the turn again, after the store refused the take: %v)", err, refusal)
	}
	if marker.Phase == PhaseAbandoned {
		return seen, false, resultOf(seen), fmt.Errorf("take for a new attempt: %w", refusal)
	}
	return seen, false, inFlight(seen), nil
}

// rerunnable decides, after a commit refused with ErrConflict, whether the
// handler runs again: only when the case moved under it, the attempt still
// holds the entry, and re-runs are left. It then renews the attempt's lease
// and returns the entry as renewed. A read that fails on the way returns
// that read's error, not the refusal: the refusal may be the case that
// moved, which is no error.
func (x *execution) rerunnable(ctx context.Context, running JournalEntry, rev CaseRevision, reruns int, conflict error) (JournalEntry, error) {
	rt := x.rt
	seen, err := rt.store.ByKey(ctx, x.account, running.Key)
	if err != nil {
		// Whether the refusal was a case that moved (no error: a re-run)
		// or this attempt superseded, only the read would tell, and it
		// failed (ErrBusy: try again): its error, naming the refusal.
		return running, fmt.Errorf("settle commit: %w (reading the entry again, after the store refused the commit: %v)", err, conflict)
	}
	if seen.Turn != x.turn {
		return seen, fmt.Errorf("settle commit: %w (turn %v adopted the command)", conflict, seen.Turn)
	}
	if seen.Status != JournalExecuting || seen.Attempt != running.Attempt {
		return seen, fmt.Errorf("settle commit: %w (attempt %v was superseded: the entry is %v under attempt %v)",
			conflict, running.Attempt, seen.Status, seen.Attempt)
	}
	moved, err := rt.store.CaseRevision(ctx, x.account, running.Case)
	if err != nil {
		return running, fmt.Errorf("settle commit: %w (reading the case's revision again, after the store refused the commit: %v)", err, conflict)
	}
	if moved == rev {
		return running, fmt.Errorf("settle commit: %w", conflict)
	}
	if reruns >= rt.cfg.maxConflictRetries {
		return running, fmt.Errorf("case %q moved from revision %d to %d under its commit, after %d re-run(s): %w",
			running.Case, rev, moved, reruns, conflict)
	}
	rt.obs.logf(ctx, slog.LevelDebug, "turnframe: case moved under a commit; running the command again",
		slog.String("key", string(running.Key)), slog.String("case", string(running.Case)),
		slog.Uint64("revision", uint64(rev)), slog.Uint64("now", uint64(moved)))
	return x.renew(ctx, running)
}

// renew renews the lease of the attempt running holds, for another command
// timeout and lease margin from now, and returns the entry as renewed. The
// write also touches the turn, so a sweep scoped to stale turns sees it in
// flight. ErrConflict when another attempt took the entry over meanwhile.
func (x *execution) renew(ctx context.Context, running JournalEntry) (JournalEntry, error) {
	return x.renewFor(ctx, running, x.rt.cfg.commandLease())
}

// renewFor is renew for a lease of length lease from now.
func (x *execution) renewFor(ctx context.Context, running JournalEntry, lease time.Duration) (JournalEntry, error) {
	rt := x.rt
	applied, err := rt.store.Apply(ctx, Write{
		Account: x.account, Turn: x.turn, Now: rt.cfg.now(),
		Settle: []Settlement{{Key: running.Key, To: JournalExecuting, Attempt: running.Attempt, Lease: lease}},
	})
	if adopted := x.adoptedAway(ctx, running.Key, err); adopted != nil {
		err = adopted
	}
	if err != nil {
		return running, fmt.Errorf("renew the lease of attempt %v: %w", running.Attempt, err)
	}
	return applied.Settled[0], nil
}

// unrecorded logs an outcome the store refused. A commit that did not land
// did nothing (its events and rows are part of it); an unknown outcome that
// did not land may have acted, and an operator must know, unless the entry
// is read uncertain or settled now: then its record already says what the
// policy or a person needs (a lease that ended was declared unknown, or
// someone settled it), and a warning does.
func (x *execution) unrecorded(ctx context.Context, e JournalEntry, end handlerEnd, err error) {
	level := slog.LevelWarn
	attrs := []slog.Attr{slog.String("key", string(e.Key)), slog.String("attempt", e.Attempt.String()),
		slog.String("outcome", end.out.kind.String()), slog.String("cause", end.cause), slog.String("error", err.Error())}
	if end.out.kind == OutcomeUnknown {
		level = slog.LevelError
		if now, ok := x.recordedElsewhere(ctx, e.Key); ok {
			level = slog.LevelWarn
			attrs = append(attrs, slog.String("status_now", now.String()))
		}
	}
	x.rt.obs.logf(ctx, level, "turnframe: command outcome could not be recorded", attrs...)
}

// recordedElsewhere reports the status of the entry under key if, read
// now, it is uncertain or settled: an unknown outcome dropped on it is
// already on record. A read that fails says nothing. It is made past the
// caller, as the write was, but for settleRetryMax at most: a store that
// hangs (a pool with no free connection) must not keep Execute from
// returning to a caller that gave up, for the sake of a log's level.
func (x *execution) recordedElsewhere(ctx context.Context, key IdempotencyKey) (JournalStatus, bool) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleRetryMax)
	defer cancel()
	now, err := x.rt.store.ByKey(rctx, x.account, key)
	if err != nil {
		return 0, false
	}
	return now.Status, now.Status.IsUncertain() || now.Status.IsSettled()
}

// settlement builds the one Write that settles entry e with out, moving it
// as s says (the attempt that ran; for a local one, the attempt it was
// seen under too), and, for the turn's last pending entry, advances the
// turn to PhaseCommitted when nothing of it is left pending, or else to
// PhaseExecuting when no take did (a local command). Write.Advance: the
// outcome lands whatever the turn's phase.
func (x *execution) settlement(ctx context.Context, e JournalEntry, s Settlement, rev CaseRevision, out Outcome) (Write, error) {
	w := Write{Account: x.account, Turn: x.turn, Now: x.rt.cfg.now()}
	switch out.kind {
	case OutcomeCommit:
		if err := x.rt.cfg.limits.checkCommit(out.events, out.outbox); err != nil {
			return Write{}, prefixed("outcome", err)
		}
		for i, ev := range out.events {
			if ev.Case != e.Case {
				return Write{}, invalid(fmt.Sprintf("outcome.events[%d].case", i),
					"command %q changes case %q, not %q", e.Key, e.Case, ev.Case)
			}
		}
		s.To = JournalCommitted
		w.Events, w.Outbox, w.App = out.events, x.rt.withTraceContext(ctx, out.outbox), out.app
		w.Expect = map[CaseKey]CaseRevision{e.Case: rev}
	case OutcomeReject:
		s.To, s.Code = JournalRejected, out.code
		err := CheckCode("code", out.code)
		if out.code == CodeApproved || out.code == CodeDenied {
			// A decision's code: on the entry it would say a person
			// denied the command and it never ran, and this one ran.
			err = invalid("code", "%s is a decision's, not a handler's", out.code)
		}
		if err != nil {
			// The rejection must be recorded whatever its code: refused,
			// the entry would stay executing and run again.
			x.rt.obs.logf(ctx, slog.LevelWarn, "turnframe: a rejection's code replaced: it is not a code a store keeps",
				slog.String("key", string(e.Key)), slog.String("error", err.Error()), slog.String("replacement", CodeInvalidRejectCode))
			s.Code = CodeInvalidRejectCode
		}
	case OutcomeUnknown:
		s.To, s.RemoteRef = JournalOutcomeUnknown, out.remoteRef
		if err := checkString("remote_ref", out.remoteRef, 0, MaxRemoteRefLen); err != nil {
			// The unknown must be recorded whatever its reference: left
			// Executing, the command would run again (I15).
			x.rt.obs.logf(ctx, slog.LevelWarn, "turnframe: unknown outcome's remote reference dropped",
				slog.String("key", string(e.Key)), slog.String("error", err.Error()))
			s.RemoteRef = ""
		}
	default:
		return Write{}, invalid("outcome", "the handler returned no outcome; build one with Commit, Reject or Unknown")
	}
	w.Settle = []Settlement{s}
	switch {
	case x.last && x.phase < PhaseCommitted:
		w.Advance = PhaseCommitted
	case x.phase < PhaseExecuting:
		w.Advance = PhaseExecuting
	}
	return w, nil
}

// settled reports a written settlement and emits its signal.
func (x *execution) settled(ctx context.Context, applied Applied, end handlerEnd) CommandResult {
	e := applied.Settled[0]
	r := resultOf(e)
	r.Ran = true
	labels := Labels{Command: e.Name}
	switch e.Status {
	case JournalCommitted:
		r.Kind = ResultCommitted
		for _, row := range applied.Outbox {
			r.OutboxIDs = append(r.OutboxIDs, row.ID)
		}
		x.rt.obs.count(SignalCommandCommitted, labels)
	case JournalRejected:
		r.Kind = ResultRejected
		labels.Outcome = e.Code
		x.rt.obs.count(SignalCommandRejected, labels)
	case JournalOutcomeUnknown:
		r.Panic, r.Stack = end.panic, end.stack
		labels.Outcome = end.cause
		x.rt.obs.count(SignalExternalOutcomeUnknown, labels)
		x.rt.obs.logf(ctx, slog.LevelWarn, "turnframe: command outcome unknown; recovery resolves it by its Remote's policy, or settle it",
			slog.String("key", string(e.Key)), slog.String("attempt", e.Attempt.String()), slog.String("cause", end.cause))
	}
	return r
}
