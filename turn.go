package turnframe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
)

// Runtime walks turns through their life: Receive stores the user's message,
// Plan admits the commands it asks for under their idempotency keys, Execute
// runs the pending ones through a Handler and writes each outcome in one
// transaction, Deliver records the answer. Every step is exactly one
// Store.Apply (Execute: two per command it runs), so a crash between two steps
// leaves a turn recovery can act on (see Recovery), and no command that
// settled ever runs again (I14).
//
// A Runtime holds no state of its own beyond its options: two Runtimes over
// one store, in one process or two, may work on the same turns. It is safe
// for concurrent use, and it starts no goroutine that outlives a call except
// a Handler that ignores its context past the command timeout (see Handler).
type Runtime struct {
	store Store
	cfg   settings
	obs   observer
}

// New returns a Runtime over store. It takes WithCommandTimeout,
// WithLeaseMargin, WithMaxConflictRetries, WithLimits, WithClock,
// WithIDGenerator, WithObserver, WithLogger, WithTraceContext, WithCommand
// and WithLocalCommand, and ignores the options of other constructors. It panics if
// store is nil: that is a programming error, not an input.
func New(store Store, opts ...Option) *Runtime {
	if isNil(store) { // a nil pointer behind it too: Open failed
		panic("turnframe: New with a nil store")
	}
	cfg := newSettings(opts)
	return &Runtime{store: store, cfg: cfg, obs: cfg.observe()}
}

// NewConversationID returns a new ConversationID from the runtime's id
// generator, for the first turn of a conversation. It writes nothing.
func (rt *Runtime) NewConversationID() ConversationID {
	return rt.cfg.ids.ConversationID(rt.cfg.now())
}

// Receive stores a user's message as a new turn of conversation, in
// PhaseReceived, and returns its id: ReceiveMessage without a message id,
// so every call is a new turn. A channel that may deliver a message twice
// (a chat platform, a webhook) should call ReceiveMessage with the
// message's id instead, or a redelivery becomes a second turn. Errors are
// ReceiveMessage's; nothing is written on any.
//
// A crash before Receive returns leaves either no turn or a received turn the
// caller does not know the id of; recovery finds the latter as a turn to
// interpret again.
func (rt *Runtime) Receive(ctx context.Context, account AccountID, conversation ConversationID, text string) (TurnID, error) {
	r, err := rt.ReceiveMessage(ctx, Inbound{Account: account, Conversation: conversation, Text: text})
	return r.Turn, err
}

// Plan is what the application made of a turn: its reading of the message,
// the cases it loaded to reach it, and the commands to run, in order.
type Plan struct {
	Understanding *Understanding // kept for recovery to rebuild the answer from; may be nil
	LoadedCases   []CaseKey      // the cases read while planning
	Commands      []Command      // admitted in this order; keys distinct
}

// Plan admits p's commands to the journal under their keys, moves the turn to
// PhasePlanned and stores p's understanding and loaded cases as the turn's
// replay record, all in one transaction. It reports, for each command in
// order, what became of it (PlanReport): its journal entry, and whether this
// Plan admitted it or its key had been admitted before — by this turn, by
// another turn (From), or by an abandoned turn this one adopted it from — so
// the application can answer a repeated message truthfully ("I already did
// that at …") instead of silently. A command that NeedsApproval is admitted
// AwaitingApproval: it runs only after Runtime.Approve.
//
// A key the account already used for the same command (same name, case,
// payload and NeedsApproval) is not admitted again: its existing entry is
// reported, whatever turn admitted it and whatever its status
// (AdmittedByThisTurn, AdmittedByAnotherTurn), and Execute of this turn will
// not run another turn's entry (it belongs to its own turn, whose Turn it
// names) — except a command that never settled in a turn that was
// abandoned: this turn adopts it (AdoptedFromAbandoned; the entry names
// this turn, From the abandoned one) and Execute runs it here, after the
// commands admitted before it. The same key for a different command is
// ErrConflict, and nothing is written.
//
// Errors: ErrInvalid for a bad account, a zero turn, a bad command or case,
// a key twice in p, more commands than Limits.Commands or a payload over
// Limits.Payload (WithLimits); ErrNotFound for a turn that does not exist for
// account; ErrConflict for a turn already past PhasePlanned, delivered or
// abandoned, and for a second interpretation of a planned turn (below).
// Nothing is written on any error. A crash leaves the turn as it was or
// planned: there is no state in between.
//
// A turn is interpreted once. A Plan of a turn already planned is taken as
// a repeat of its plan (as after a crash, or a Plan whose answer was lost):
// it is accepted only if it admits nothing new (Write.RepeatOnly, checked
// in the store's transaction) — each command's key is one the turn
// admitted already (AdmittedByThisTurn), or one another turn holds and
// keeps (AdmittedByAnotherTurn) — and it leaves the turn's replay record
// as the first plan wrote it. A command the turn never admitted, or one it
// would adopt from an abandoned turn, is another reading of the message:
// ErrConflict, and nothing is written. Two flows do interpret one turn at
// once — the application and a recovery pass that found it unplanned
// (ActionRestartInterpretation), or two processes' start-up passes — and
// may read it differently, and one message must not book two seats. The Write expects the phase the turn is
// in (Write.ExpectPhase: PhaseReceived, unless the store refuses that and
// a read says otherwise), so of two Plans of an unplanned turn the first
// lands and the other is judged as a repeat of it; should that read fail,
// Plan returns its error (ErrBusy: try again), never ErrConflict.
func (rt *Runtime) Plan(ctx context.Context, account AccountID, turn TurnID, p Plan) (PlanReport, error) {
	if err := CheckTurnRef(account, turn); err != nil {
		return PlanReport{}, err
	}
	if err := p.validate(rt.cfg.limits); err != nil {
		return PlanReport{}, prefixed("plan", err)
	}
	applied, err := rt.planOnce(ctx, account, turn, p)
	if err != nil {
		return PlanReport{}, fmt.Errorf("plan turn %v: %w", turn, err)
	}
	report := PlanReport{Admissions: make([]Admission, len(applied.Admitted))}
	for i, e := range applied.Admitted {
		report.Admissions[i] = admissionOf(turn, applied.Earlier[i], e)
	}
	return report, nil
}

// planOnce writes p as the turn's plan, or as a repeat of it
// (Write.RepeatOnly, which keeps the turn's replay record), under the
// phase the turn is in (underPhase): first as the usual case, a turn just
// received, without reading it.
func (rt *Runtime) planOnce(ctx context.Context, account AccountID, turn TurnID, p Plan) (Applied, error) {
	return rt.underPhase(ctx, account, turn, PhaseReceived, func(phase TurnPhase) (Applied, error) {
		w := Write{Account: account, Turn: turn, Phase: PhasePlanned, ExpectPhase: phase, Admit: p.Commands, Now: rt.cfg.now()}
		if phase == PhasePlanned {
			w.RepeatOnly = true // the record stays the first plan's: a turn is interpreted once
		} else {
			w.Replay = &ReplayRecord{Understanding: p.Understanding, LoadedCases: p.LoadedCases}
		}
		return rt.store.Apply(ctx, w)
	})
}

// underPhase calls write with the phase its Write must expect
// (Write.ExpectPhase), first phase; when the store refuses it with
// ErrConflict and the turn's phase, read then, has moved, it calls write
// again under that phase. A phase never goes back, so write runs at most
// once per phase; a refusal under a phase that did not move is the
// caller's error, returned as it is. When that read fails, the refusal
// may be the phase having moved, which says nothing against the call: the
// read's error is returned (ErrBusy: the call, tried again, is judged
// under the phase it finds), never the refusal's ErrConflict.
func (rt *Runtime) underPhase(ctx context.Context, account AccountID, turn TurnID, phase TurnPhase, write func(TurnPhase) (Applied, error)) (Applied, error) {
	for tries := 1; ; tries++ {
		applied, err := write(phase)
		if !errors.Is(err, ErrConflict) || tries > int(PhaseAbandoned) {
			return applied, err
		}
		marker, rerr := rt.store.TurnPhase(ctx, account, turn)
		if rerr != nil {
			return applied, fmt.Errorf("%w (reading the turn's phase again, after the store refused the write expecting %v: %v)", rerr, phase, err)
		}
		if marker.Phase == phase {
			return applied, err
		}
		phase = marker.Phase
	}
}

func (p Plan) validate(l Limits) error {
	if err := l.checkPlan(p); err != nil {
		return err
	}
	for i, c := range p.LoadedCases {
		if err := c.Validate(); err != nil {
			return prefixed(fmt.Sprintf("loaded_cases[%d]", i), err)
		}
	}
	seen := make(map[IdempotencyKey]bool, len(p.Commands))
	for i, cmd := range p.Commands {
		field := fmt.Sprintf("commands[%d]", i)
		if err := cmd.Validate(); err != nil {
			return prefixed(field, err)
		}
		if seen[cmd.Key] {
			return invalid(field+".key", "%q appears twice in one plan", cmd.Key)
		}
		seen[cmd.Key] = true
	}
	return nil
}

// Execute runs the turn's pending commands through h, in admission order, and
// returns what became of each. For every journal entry of the turn:
//
//   - Committed or Rejected: skipped, never run again (I14).
//   - AwaitingApproval: reported ResultAwaitingApproval and skipped; the
//     entries after it still run. Runtime.Approve makes it Pending, and a
//     later Execute runs it; Runtime.Deny rejects it.
//   - OutcomeUnknown or NeedsIntervention: reported and left alone, never
//     run again blindly (I15); Recovery.Recover resolves it by policy, or
//     Recovery.Settle by hand.
//   - Executing under an attempt that died (a crash or a cancelled context
//     cut it short, and its lease ended), of a command whose declared
//     Remote (WithCommand) can be asked, can do neither, or deduplicates
//     but has forgotten the key or had its resends: one Apply declares it
//     OutcomeUnknown (CodeLeaseEnded) for the policy, and it is not run.
//   - Pending, or Executing under an attempt that died otherwise: one Apply
//     takes it for a new attempt — a
//     compare-and-set on the attempt Execute read, leased for the command
//     timeout plus WithLeaseMargin — and moves the turn to PhaseExecuting
//     on its first attempt; h is called with the case's revision, read
//     just before the take (a read that fails stops Execute with the entry
//     still Pending, never held by an attempt that did not run), under the
//     command timeout (while it runs, a wall clock stepped
//     forward near the lease's end has the lease renewed within a second:
//     WithLeaseMargin); one more Apply writes the outcome. A
//     Commit writes the events (checked against that revision), the outbox
//     rows, the Committed entry and the app's own writes (Outcome.With) in
//     one transaction; a Reject writes the
//     code, an Unknown the remote reference. The Apply of the turn's last
//     pending entry also moves the turn to PhaseCommitted when nothing of
//     it is left pending — if the turn may still move: the outcome is
//     written even when the turn was abandoned, or another entry went back
//     to pending, while h ran. A
//     handler that answered after its deadline (or never), or that
//     panicked, is OutcomeUnknown under its attempt id; the result carries
//     a panic's value and stack, and SignalExternalOutcomeUnknown is
//     emitted.
//   - Pending, of a command declared local (WithLocalCommand): no take.
//     h is called under a new attempt id with the case's current
//     revision, and one Apply writes the outcome as above, settling the
//     entry straight from Pending (a compare-and-set on the attempt
//     Execute read) and moving the turn to PhaseExecuting, or to
//     PhaseCommitted after its last pending entry. A handler that panicked
//     or answered after its deadline leaves the entry Pending, nothing
//     written: Execute stops there with an error (a timeout's wraps
//     context.DeadlineExceeded; the result carries a panic's value and
//     stack), and a later Execute runs it again. An outcome the store
//     refused because another Execute settled the entry meanwhile is
//     thrown away, and the entry reported as it is.
//   - Executing under another attempt whose lease has not ended — by this
//     runtime's clock, or by the store's when it refused the take (a lease
//     ending just then, a store on the database's clock): another Execute
//     is running it now. It is reported ResultInFlight, not run, and
//     Execute stops there without an error (the pending entries after it
//     are ResultPending): a command runs in at most one place at a time.
//
// When a Commit finds its case moved since the revision h was given, h is
// called again, with the same attempt and the new revision, at most
// WithMaxConflictRetries times (default 3), renewing the attempt's lease
// (and so the turn's update time) before each call; then Execute stops with
// ErrConflict naming the key, and the entry stays Executing (pending) with
// nothing of its outcome written. A command whose Remote is declared not to
// deduplicate is never called again so (the remote would act twice): its
// attempt is settled unknown, CodeRerunWithheld, for its Remote's policy;
// at one that deduplicates, only a call that reaches it within its window
// is made (see Remote).
//
// Execute stops at the first error and returns it with the report so far:
// the failing entry and every pending entry after it are reported
// ResultPending (an entry after it awaiting approval, or settled, is
// reported as such).
// Errors: ErrInvalid for a bad account, a zero turn or a nil h, before
// anything is read; ErrNotFound for a turn that does not exist for account;
// ErrConflict for an abandoned turn (nothing runs), for a case that kept
// moving, for an attempt superseded while h ran, or for a command a new
// turn's plan adopted (this turn abandoned) since Execute read the turn —
// never for a take, a local settlement, a declaration of a dead attempt
// or a commit the store refused when what would say why (the entry, the
// case's revision, or the turn's phase) could not be read again: that is
// the read's error (ErrBusy: try again);
// ErrAppWrite, wrapping the app's own error, when a Commit's writes
// (Outcome.With) failed
// (nothing of the outcome is written, and the entry stays Executing under
// its attempt, as after a crash before the commit — a local command's
// stays Pending); ErrInvalid when h
// commits events of a case other than its command's, commits more events
// or outbox messages than Limits.Events or Limits.Messages, or an event's
// data or a message's payload over Limits.EventData or Limits.Payload
// (WithLimits), or returns the zero Outcome (a programming error: nothing
// of that outcome is written, the entry stays pending). When ctx itself is
// cancelled while h runs, Execute returns ctx's error at once and leaves
// the entry Executing under its lease, to be taken over by a later Execute
// once the lease ended (a local command's stays Pending, with no lease: a
// later Execute runs it at once); h keeps running until it honours its
// (cancelled) context, and an answer it gives after that is discarded.
// When ctx ended after Execute took the entry from Pending but before it
// called h (or a renewal that call needed failed), h is not called: the
// entry is put back Pending, the attempt uncounted, and a later Execute
// runs it at once — nothing was sent, so no Remote's policy is asked —
// unless the turn was abandoned meanwhile: then it stays held, as above.
//
// A crash between the two writes leaves the entry Executing, possibly after
// h reached its remote: once its lease ended, a later Execute runs it again
// under the same key and a new attempt id (the remote recognises the key),
// or declares it unknown, as above. A crash after the second write loses
// nothing: the outcome, its events and its outbox rows were written
// together. A local command has only the second write: a crash before it
// leaves the entry Pending, as if it never ran, and a later Execute runs
// it. A delivered turn may still have a pending entry (a resend
// settled after delivery); Execute runs it without touching the phase.
func (rt *Runtime) Execute(ctx context.Context, account AccountID, turn TurnID, h Handler) (ExecuteReport, error) {
	if err := CheckTurnRef(account, turn); err != nil {
		return ExecuteReport{}, err
	}
	if isNil(h) {
		return ExecuteReport{}, invalid("handler", "nil")
	}
	marker, err := rt.store.TurnPhase(ctx, account, turn)
	if err != nil {
		return ExecuteReport{}, fmt.Errorf("execute turn %v: %w", turn, err)
	}
	report := ExecuteReport{Phase: marker.Phase}
	if marker.Phase == PhaseAbandoned {
		return report, fmt.Errorf("execute turn %v: %w: the turn is abandoned; its commands never run", turn, ErrConflict)
	}
	entries, err := rt.store.ForTurn(ctx, account, turn)
	if err != nil {
		return report, fmt.Errorf("execute turn %v: %w", turn, err)
	}
	report.Results = make([]CommandResult, len(entries))
	for i, e := range entries {
		report.Results[i] = resultOf(e)
	}
	x := &execution{rt: rt, account: account, turn: turn, phase: marker.Phase, h: h}
	for i, e := range entries {
		if !e.Status.IsPending() {
			continue
		}
		x.last = !slices.ContainsFunc(entries[i+1:], func(later JournalEntry) bool { return later.Status.IsPending() })
		res, err := x.run(ctx, e)
		report.Results[i] = res
		report.Phase = x.phase
		if err != nil {
			return report, fmt.Errorf("execute turn %v: command %q: %w", turn, e.Key, err)
		}
		if res.Kind == ResultInFlight || res.Kind == ResultPending {
			break // the turn's commands run in admission order
		}
	}
	return report, nil
}

// Deliver records that the answer response went back to the user: the turn
// moves to PhaseDelivered, terminal, and response joins its replay record
// (the understanding and loaded cases Plan stored are kept). One transaction.
//
// Errors: ErrInvalid for a bad account, a zero turn, or a response over
// Limits.Text (64 KiB unless WithLimits lowered it) or not UTF-8;
// ErrNotFound for a turn that does not exist for account; ErrConflict while a journal entry of the turn is pending (Pending or
// Executing: run Execute first) or when the turn is already terminal. An
// entry that is outcome unknown does not hold delivery back: the answer may
// say the effect is being verified. Nor does one awaiting approval: the
// answer may say it waits for approval, and once approved it runs on the
// delivered turn (Execute, or recovery's ResumeCommands). Nothing is written on any error.
//
// A crash before the write leaves the turn as it was, which recovery sees as
// a turn to answer again; the user may then get the answer twice, never the
// effect.
//
// The replay record is read, then written whole, under the phase it was
// read in (Write.ExpectPhase): a Plan of the same turn that lands in between
// makes Deliver read it again, so what the Plan stored is kept — and if the
// Plan admitted commands, Deliver is the ErrConflict above. A failed read
// then is that read's error (ErrBusy: try again), never ErrConflict; so
// for Abandon.
func (rt *Runtime) Deliver(ctx context.Context, account AccountID, turn TurnID, response string) error {
	if err := CheckTurnRef(account, turn); err != nil {
		return err
	}
	if err := rt.cfg.limits.checkText("response", response); err != nil {
		return err
	}
	err := rt.finish(ctx, account, turn, PhaseDelivered, func(r *ReplayRecord) { r.Response = response })
	if err != nil {
		return fmt.Errorf("deliver turn %v: %w", turn, err)
	}
	return nil
}

// Abandon gives a turn up: it moves to PhaseAbandoned, terminal, with code
// (at most 200 bytes; may be empty) kept in its replay record as the reason.
// Its pending entries stay as they are and are never run: Execute refuses an
// abandoned turn — also one another turn was told it holds
// (AdmittedByAnotherTurn, "in progress"): it runs only once a later plan of
// the same command adopts it. Its uncertain entries are still resolved by
// Recover or Settle. Like Deliver, it keeps what a Plan landing between its
// read of the replay record and its write stored.
//
// Errors: ErrInvalid for bad input; ErrNotFound for a turn that does not
// exist for account; ErrConflict for a turn already delivered or abandoned.
// Nothing is written on any error; a crash leaves the turn as it was.
func (rt *Runtime) Abandon(ctx context.Context, account AccountID, turn TurnID, code string) error {
	if err := CheckTurnRef(account, turn); err != nil {
		return err
	}
	if err := CheckCode("code", code); err != nil {
		return err
	}
	err := rt.finish(ctx, account, turn, PhaseAbandoned, func(r *ReplayRecord) { r.AbandonCode = code })
	if err != nil {
		return fmt.Errorf("abandon turn %v: %w", turn, err)
	}
	return nil
}

// finish moves the turn to the terminal phase to, with its replay record as
// edit leaves it. The record is read after the phase, and the Write expects
// that phase (underPhase): a Plan — the one write that changes the record
// before a turn ends — landing between the read and the write moves the
// phase, the store refuses the Write, and the record is read again. A
// record that breaks today's rules, which an earlier release kept, is
// fitted to them (ReplayRecord.fitted): written back whole, it would be
// refused, and the turn could never end.
func (rt *Runtime) finish(ctx context.Context, account AccountID, turn TurnID, to TurnPhase, edit func(*ReplayRecord)) error {
	marker, err := rt.store.TurnPhase(ctx, account, turn)
	if err != nil {
		return err
	}
	_, err = rt.underPhase(ctx, account, turn, marker.Phase, func(phase TurnPhase) (Applied, error) {
		rec, err := rt.replayOf(ctx, account, turn)
		if err != nil {
			return Applied{}, err
		}
		if fit, changed := rec.fitted(); changed {
			rt.obs.logf(ctx, slog.LevelWarn, "turnframe: a replay record an earlier release kept breaks today's rules; it is fitted to them as its turn ends",
				slog.String("turn", turn.String()), slog.Int("loaded_cases", len(rec.LoadedCases)), slog.Int("kept_cases", len(fit.LoadedCases)))
			rec = fit
		}
		edit(&rec)
		return rt.store.Apply(ctx, Write{Account: account, Turn: turn, Phase: to, ExpectPhase: phase, Replay: &rec, Now: rt.cfg.now()})
	})
	return err
}

// replayOf returns the turn's replay record, or an empty one for a turn that
// has none yet. A turn that does not exist is left for Apply to report, so
// the error is the store's ErrNotFound either way.
func (rt *Runtime) replayOf(ctx context.Context, account AccountID, turn TurnID) (ReplayRecord, error) {
	rec, err := rt.store.Replay(ctx, account, turn)
	if errors.Is(err, ErrNotFound) {
		return ReplayRecord{}, nil
	}
	return rec, err
}
