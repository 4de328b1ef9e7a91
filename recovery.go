package turnframe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"unicode/utf8"
)

// MaxCaseEvents is the most events Recovery.CaseEvents reads back per call.
const MaxCaseEvents = 1024

// ActionKind is what recovery decided a turn needs.
type ActionKind uint8

const (
	// ActionNothing: the turn is finished and nothing it started is
	// unsettled.
	ActionNothing ActionKind = iota
	// ActionRestartInterpretation: no command was ever admitted, so nothing
	// can have happened; interpret the turn's text again from the start.
	ActionRestartInterpretation
	// ActionResumeCommands: commands were admitted and not settled. Resume
	// them through Runtime.Execute, which recognises by key what already
	// ran (I14). The only action that may cause an effect.
	ActionResumeCommands
	// ActionRegenerateResponse: the answer is missing and nothing is left
	// to run: every command settled, or (Recovery.Recover, once the policy
	// is done) the ones still unknown are named in RecoveryAction.Entries,
	// which the answer may say are being verified. Rebuild it from the
	// committed events and the answer tasks; execute nothing.
	ActionRegenerateResponse
	// ActionReconcileExternal: a command's outcome is unknown (it is
	// OutcomeUnknown, or it was left running on an abandoned turn and its
	// lease ended). Settle it against the remote system
	// (Recovery.Recover by policy, or Recovery.Settle), never repeat it
	// blindly (I15) — even when the
	// turn was delivered or abandoned.
	ActionReconcileExternal
)

var actionNames = [...]string{"nothing", "restart_interpretation", "resume_commands", "regenerate_response", "reconcile_external"}

// String returns the kind in snake case, stable for logs and metrics.
func (k ActionKind) String() string { return enumName(actionNames[:], int(k), "action") }

// RecoveryAction is recovery's decision for one turn and what acting on it
// needs. Which fields are set depends on Kind.
type RecoveryAction struct {
	Kind  ActionKind
	Phase TurnPhase // the turn's phase when decided
	// Entries, in admission order: for ResumeCommands the pending entries;
	// for ReconcileExternal the unknown and stranded ones; for a
	// RegenerateResponse that answers around unknowns the policy left
	// (Recovery.Recover), those unknown ones, so the answer may say they
	// are being verified; otherwise none.
	Entries     []JournalEntry
	Attempts    []AttemptID   // ReconcileExternal: the attempts to settle, one per entry
	Events      []StoredEvent // RegenerateResponse: the events the turn committed, in append order
	AnswerTasks []AnswerTask  // RegenerateResponse: the questions to answer
	// Awaiting are, whatever Kind, the turn's entries awaiting approval, in
	// admission order. Recovery never runs or rejects them: they wait for
	// Runtime.Approve or Runtime.Deny, and a regenerated answer may say so.
	Awaiting []JournalEntry
}

// MayCauseEffects reports whether acting on the decision may cause a domain
// effect: true only for ActionResumeCommands, and then only through the
// idempotency key.
func (a RecoveryAction) MayCauseEffects() bool { return a.Kind == ActionResumeCommands }

// SourcePolicy says which sources may answer a question.
type SourcePolicy uint8

const (
	// SourcesAuthoritative: only the domain's committed state may answer.
	SourcesAuthoritative SourcePolicy = iota
	// SourcesAny: any source may answer, general knowledge included.
	SourcesAny
)

var sourceNames = [...]string{"authoritative", "any"}

// String returns the policy in snake case.
func (p SourcePolicy) String() string { return enumName(sourceNames[:], int(p), "source policy") }

// AnswerTask is one question a regenerated response must answer.
type AnswerTask struct {
	Unit              int          // the question's unit, from the understanding
	Question          string       // the question's words, cut from the turn's text; empty when its range is not valid
	AskedAt           WordRange    // where it was asked
	Basis             AnswerBasis  // what the answer rests on
	Sources           SourcePolicy // which sources may answer
	Cases             []CaseKey    // the cases the turn loaded
	ContinuesPrevious bool
}

// AnswerTasksOf returns the answer tasks a replay record implies, with each
// question's words cut from text by byte range. A range out of bounds,
// reversed, or not on UTF-8 boundaries gives an empty question, never a
// panic. After commit, the state after the turn is the state now, so every
// basis becomes BasisCurrentCommittedState and asks for authoritative
// sources, except BasisGeneralDomainKnowledge, which stays and accepts any
// source. A nil record, or one without an understanding, implies no task.
func AnswerTasksOf(record *ReplayRecord, text string) []AnswerTask {
	if record == nil || record.Understanding == nil {
		return nil
	}
	tasks := make([]AnswerTask, 0, len(record.Understanding.Questions))
	for _, q := range record.Understanding.Questions {
		task := AnswerTask{
			Unit:              q.Unit,
			Question:          cut(text, q.Words.Start, q.Words.End),
			AskedAt:           q.Words,
			Basis:             BasisCurrentCommittedState,
			Sources:           SourcesAuthoritative,
			Cases:             append([]CaseKey(nil), record.LoadedCases...),
			ContinuesPrevious: q.ContinuesPrevious,
		}
		if q.Basis == BasisGeneralDomainKnowledge {
			task.Basis, task.Sources = BasisGeneralDomainKnowledge, SourcesAny
		}
		tasks = append(tasks, task)
	}
	return tasks
}

// cut returns text[start:end], or "" when the range is not a valid one.
func cut(text string, start, end int) string {
	if start < 0 || end > len(text) || start > end {
		return ""
	}
	if !boundary(text, start) || !boundary(text, end) {
		return ""
	}
	return text[start:end]
}

func boundary(text string, i int) bool { return i == len(text) || utf8.RuneStart(text[i]) }

// CommittedEventIDs returns every event id the committed entries appended, in
// entry order and, within an entry, in append order.
func CommittedEventIDs(entries []JournalEntry) []EventID {
	var ids []EventID
	for _, e := range entries {
		if e.Status == JournalCommitted {
			ids = append(ids, e.EventIDs...)
		}
	}
	return ids
}

// Recovery reads what crashed turns left behind and decides, per turn, what
// each needs. It only reads; acting on a decision is the application's (see
// Recover). It is safe for concurrent use.
type Recovery struct {
	store Store
	cfg   settings
	obs   observer
}

// NewRecovery returns a Recovery over store. It honours WithObserver,
// WithLogger, WithClock (the time against which it judges whether a lease
// ended, and every time it writes: expiries, policy steps, settlements) and
// the Remote declarations (WithDestination, WithCommand), and
// WithCommandTimeout and WithLeaseMargin, whose command lease is
// RecoveryLoop.StaleAfter's default. A nil store panics.
func NewRecovery(store Store, opts ...Option) *Recovery {
	if isNil(store) { // a nil pointer behind it too: Open failed
		panic("turnframe: NewRecovery with a nil store")
	}
	cfg := newSettings(opts)
	return &Recovery{store: store, cfg: cfg, obs: cfg.observe()}
}

// Unfinished returns, oldest first, at most limit turns in scope for which
// the package-level Unfinished holds: non-terminal turns, and terminal ones
// still holding an unknown outcome, a resend, or (abandoned) an attempt
// that was running. A delivered turn can still have a payment nobody
// settled, and a sweep must reach it. limit is 1 to MaxLimit; another
// (0, a negative one) is ErrInvalid, as is an invalid scope.
func (r *Recovery) Unfinished(ctx context.Context, scope RecoveryScope, limit int) ([]TurnPhaseMarker, error) {
	markers, err := r.store.ListUnfinishedTurns(ctx, scope, limit)
	if err != nil {
		return nil, fmt.Errorf("unfinished turns: %w", err)
	}
	return markers, nil
}

// Decide returns what the turn needs, decided in this order — the order is
// the safety property:
//
//  1. an entry whose outcome is unknown → ActionReconcileExternal, even on
//     a terminal turn: an OutcomeUnknown or NeedsIntervention entry; a
//     Stranded one (left Executing on an abandoned turn under a lease that
//     ended at the recovery's clock: it may have acted, and nothing will
//     ever run it again); or an attempt that died (Executing, its lease
//     ended) of a command whose declared Remote forbids running it again
//     blindly (see WithCommand) — it may have acted too;
//  2. a terminal phase → ActionNothing, except a Delivered turn holding a
//     pending entry (a resend reconciliation asked for after delivery),
//     which goes on to rule 3;
//  3. a Pending or Executing entry → ActionResumeCommands;
//  4. any entry, or a turn planned already → ActionRegenerateResponse,
//     with the committed events and the answer tasks (a plan that
//     admitted nothing of its own is answered, not planned again: a turn
//     is planned once, see Runtime.Plan);
//  5. otherwise (a turn never planned, with no entry) →
//     ActionRestartInterpretation.
//
// Entries awaiting approval decide nothing: they are neither pending nor
// unknown, so a turn holding one is decided by its other entries (a
// non-terminal one whose others all settled regenerates its answer, which
// may say what waits; a delivered one is ActionNothing), and they are
// listed in action.Awaiting whatever the decision.
//
// A turn that does not exist for account, another tenant's included, is
// ErrNotFound. Decide writes nothing; it emits SignalRecoveryDecided labelled
// with the action.
func (r *Recovery) Decide(ctx context.Context, account AccountID, turn TurnID) (RecoveryAction, error) {
	if err := account.Validate(); err != nil {
		return RecoveryAction{}, err
	}
	if err := CheckID("turn", turn); err != nil {
		return RecoveryAction{}, err
	}
	return r.decided(ctx, account, turn, false)
}

// Triage returns the decision Decide makes for the turn, by the same rule
// from the same reads, without what acting on it needs: Kind, Phase,
// Entries, Attempts and Awaiting are Decide's, but an
// ActionRegenerateResponse comes without its Events and AnswerTasks. It
// reads the turn's entries and phase only, never an event's data, the
// replay record or the turn's text: for a caller that shows the decision
// (turnframe turns --unfinished) and would otherwise read every event a
// turn committed to print one word.
//
// A turn that does not exist for account is ErrNotFound. Triage writes
// nothing and emits no signal: nothing acts on what it returns.
func (r *Recovery) Triage(ctx context.Context, account AccountID, turn TurnID) (RecoveryAction, error) {
	if err := account.Validate(); err != nil {
		return RecoveryAction{}, err
	}
	if err := CheckID("turn", turn); err != nil {
		return RecoveryAction{}, err
	}
	action, err := r.decide(ctx, account, turn, false, false)
	if err != nil {
		return action, fmt.Errorf("triage turn %v: %w", turn, err)
	}
	return action, nil
}

// decided is Decide once its input is valid; around says whether a turn
// whose unknowns the policy left is answered around them (see decide).
func (r *Recovery) decided(ctx context.Context, account AccountID, turn TurnID, around bool) (RecoveryAction, error) {
	action, err := r.decide(ctx, account, turn, around, true)
	if err != nil {
		return action, fmt.Errorf("decide turn %v: %w", turn, err)
	}
	r.obs.count(SignalRecoveryDecided, Labels{Action: action.Kind.String()})
	r.obs.logf(ctx, slog.LevelDebug, "recovery decided", slog.String("turn", turn.String()),
		slog.String("phase", action.Phase.String()), slog.String("action", action.Kind.String()))
	return action, nil
}

// decide reads the turn's entries before its phase: a Plan writes both in
// one transaction, so a phase read still before PhasePlanned after an empty
// list of entries means no plan had landed when the list was read, and a
// turn is restarted only if it was never planned. Read the other way, a
// Plan landing between the reads left a planned turn looking unplanned.
//
// It decides by rule, and then, when answer is set and the decision is
// ActionRegenerateResponse, reads what the answer needs (regenerate). The
// answer is built from the same read as the decision, so it names the
// unknown and awaiting entries as they are, not as an earlier read saw
// them. On a failure to build it, the action returned names the decision
// it was for.
func (r *Recovery) decide(ctx context.Context, account AccountID, turn TurnID, around, answer bool) (RecoveryAction, error) {
	entries, err := r.store.ForTurn(ctx, account, turn)
	if err != nil {
		return RecoveryAction{}, err
	}
	marker, err := r.store.TurnPhase(ctx, account, turn)
	if err != nil {
		return RecoveryAction{}, err
	}
	action := r.rule(entries, marker.Phase, around)
	if action.Kind != ActionRegenerateResponse || !answer {
		return action, nil
	}
	answered, err := r.regenerate(ctx, account, turn, entries, action)
	if err != nil {
		return RecoveryAction{Kind: ActionRegenerateResponse, Phase: marker.Phase}, err
	}
	return answered, nil
}

// rule is Decide's order, applied to a turn's entries and phase as read:
// the one place the decision is made. An ActionRegenerateResponse it
// returns holds no events or answer tasks yet (regenerate adds them).
//
// around asks for rule 1 as Recover applies it once the policy has had the
// unknowns: a turn not yet terminal with no pending entry is answered
// around them (ActionRegenerateResponse, naming them in Entries), as
// Deliver would have; with a pending one it waits.
func (r *Recovery) rule(entries []JournalEntry, phase TurnPhase, around bool) RecoveryAction {
	action := RecoveryAction{Phase: phase}
	action.Awaiting = entriesWhere(entries, func(e JournalEntry) bool { return e.Status.IsAwaitingApproval() })
	now := r.cfg.now()
	unknown := entriesWhere(entries, func(e JournalEntry) bool {
		return e.Status.IsUncertain() || Stranded(e, phase, now) || r.cfg.rerunForbidden(e, now)
	})
	pending := entriesWhere(entries, func(e JournalEntry) bool { return e.Status.IsPending() })
	if len(unknown) > 0 {
		if around && !phase.IsTerminal() && len(pending) == 0 {
			action.Kind, action.Entries = ActionRegenerateResponse, unknown
			return action
		}
		action.Kind, action.Entries = ActionReconcileExternal, unknown
		for _, e := range unknown {
			action.Attempts = append(action.Attempts, e.Attempt)
		}
		return action
	}
	if phase.IsTerminal() && (phase != PhaseDelivered || len(pending) == 0) {
		action.Kind = ActionNothing // an abandoned turn's attempts still running settle themselves
		return action
	}
	if len(pending) > 0 {
		action.Kind, action.Entries = ActionResumeCommands, pending
		return action
	}
	if len(entries) == 0 && phase < PhasePlanned {
		action.Kind = ActionRestartInterpretation
		return action
	}
	action.Kind = ActionRegenerateResponse
	return action
}

func (r *Recovery) regenerate(ctx context.Context, account AccountID, turn TurnID, entries []JournalEntry, action RecoveryAction) (RecoveryAction, error) {
	action.Kind = ActionRegenerateResponse
	events, err := r.store.EventsByID(ctx, account, CommittedEventIDs(entries))
	if err != nil {
		return RecoveryAction{}, err
	}
	record, err := r.Record(ctx, account, turn)
	if err != nil {
		return RecoveryAction{}, err
	}
	stored, err := r.store.LoadTurn(ctx, account, turn)
	if err != nil {
		return RecoveryAction{}, err
	}
	action.Events = events
	action.AnswerTasks = AnswerTasksOf(record, stored.Text)
	return action, nil
}

func entriesWhere(entries []JournalEntry, keep func(JournalEntry) bool) []JournalEntry {
	var out []JournalEntry
	for _, e := range entries {
		if keep(e) {
			out = append(out, e)
		}
	}
	return out
}

// StoredTurn returns the turn as stored, for a caller that regenerates a
// response or restarts interpretation. ErrNotFound for a turn that does not
// exist for account.
func (r *Recovery) StoredTurn(ctx context.Context, account AccountID, turn TurnID) (StoredTurn, error) {
	t, err := r.store.LoadTurn(ctx, account, turn)
	if err != nil {
		return StoredTurn{}, fmt.Errorf("stored turn %v: %w", turn, err)
	}
	return t, nil
}

// Record returns the turn's replay record, or (nil, nil) when the turn has
// none: a turn can crash before its first record is written, and that is a
// normal thing to find. Other errors are returned.
func (r *Recovery) Record(ctx context.Context, account AccountID, turn TurnID) (*ReplayRecord, error) {
	record, err := r.store.Replay(ctx, account, turn)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("replay record of turn %v: %w", turn, err)
	}
	return &record, nil
}

// CaseEvents returns the case's events with a revision above since, in
// revision order, at most MaxCaseEvents of them: for a regeneration that
// needs more than the turn's own events.
func (r *Recovery) CaseEvents(ctx context.Context, account AccountID, c CaseKey, since CaseRevision) ([]StoredEvent, error) {
	events, err := r.store.EventsSince(ctx, account, c, since, MaxCaseEvents)
	if err != nil {
		return nil, fmt.Errorf("events of case %q: %w", c, err)
	}
	return events, nil
}
