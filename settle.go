package turnframe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
)

// Decision is how a person, the application or the policy settles an
// uncertain outcome: Verdict, a Code kept on the entry or row (a
// rejection's reason), the remote's reference if it gave one, who decided
// (Actor; "" is ActorApp) and why (Note, for the audit trail). Settle
// takes the Actor of the application or a person only (MayIntervene): the
// names of turnframe's own recovery, policy and dispatch workers are the
// library's, which the policy's own settlements carry.
type Decision struct {
	Verdict   Verdict
	Code      string
	RemoteRef string
	Actor     Actor
	Note      string
	// Attempt, when not empty, is the attempt the decision was made about,
	// as the audit trail names it (HistoryRecord.Attempt): a journal
	// entry's attempt id, an outbox row's attempt number. Settle then
	// refuses (ErrConflict) a subject at another attempt: one sent again
	// since the person looked, whose new outcome nobody has seen. An
	// operator's page or tool should always set it. Empty settles whatever
	// attempt the subject is at; one that names no attempt (not an id, the
	// zero id, a number below 1) is ErrInvalid.
	Attempt string
}

// Settle is the one way to resolve an uncertain outcome, of either kind:
// subject names a command's journal entry (JournalSubject: account and key)
// or an outbox row (OutboxSubject: account and row id). By d.Verdict:
//
//   - VerdictCompleted: the remote has it. An entry becomes Committed (with
//     no events: what the remote did is the remote's record), a row
//     Completed. d.Code, if given, is kept as the reason.
//   - VerdictFailed: it does not and never will. An entry becomes Rejected,
//     a row Failed, with d.Code.
//   - VerdictResend: the remote certainly never received it, or it still
//     remembers the key. An entry goes back to Pending (the next Execute of
//     its turn runs it under the same key); a row to Pending, due now.
//     d.Code, if given, is kept as the reason until the next attempt.
//   - VerdictEscalate: nothing can settle it safely; it becomes
//     NeedsIntervention, which only an actor that MayIntervene settles.
//   - VerdictUnresolved: nothing is read or written; Settle returns nil
//     once its input is valid, whatever the subject.
//
// It settles an OutcomeUnknown or NeedsIntervention entry or row, and an
// entry left Executing on an abandoned turn whose lease ended (Stranded),
// as Completed or Failed. The move is one transaction and lands in the
// audit trail with d's actor, code and note.
//
// For the other verdicts — errors: ErrInvalid for a bad subject, verdict,
// code (CodeApproved and CodeDenied are Runtime.Approve's and Deny's), actor
// (one Actor.Validate refuses, or turnframe's own — ActorRecovery,
// ActorPolicy, a WorkerActor — whatever the subject's status: the trail
// would show the library deciding what the caller did, and the policy
// counts its resends by its name), note or attempt;
// ErrNotFound for a subject that does not exist for its account;
// ErrConflict for one whose outcome is not unknown (a concurrent settle won,
// or it never was), for one at another attempt than d.Attempt, for a
// resend of a command of an abandoned turn (it would never run), and for
// escalating a NeedsIntervention one again — never for an entry's
// settlement the store refused when the entry could not be read again to
// tell a move since the read (tried again) from a refusal of the decision:
// that is the read's error (ErrBusy: try again). Nothing is written on any
// error.
func (r *Recovery) Settle(ctx context.Context, subject Subject, d Decision) error {
	if d.Actor != "" && !d.Actor.MayIntervene() {
		return invalid("actor", "%q is turnframe's own recovery, policy or dispatch worker: the application or a person settles under its own name", d.Actor)
	}
	f, err := fenceFrom(subject, d.Attempt)
	if err != nil {
		return err
	}
	return r.settle(ctx, subject, d, f)
}

// fenceFrom returns the fence a Decision's Attempt names for subject.
func fenceFrom(subject Subject, attempt string) (fence, error) {
	if attempt == "" {
		return fence{}, nil
	}
	if subject.Kind == SubjectJournal {
		id, err := ParseAttemptID(attempt)
		if err != nil || id.IsZero() {
			// The zero id names no attempt, and as a fence it would expect nothing.
			return fence{}, invalid("attempt", "%q is not an attempt id", attempt)
		}
		return fence{attempt: id}, nil
	}
	n, err := strconv.Atoi(attempt)
	if err != nil || n < 1 {
		return fence{}, invalid("attempt", "%q is not an attempt number", attempt)
	}
	return fence{attempts: n}, nil
}

// fence is what a settlement of an uncertain outcome expects to find: the
// attempt (an entry) or attempt number (a row) whose outcome was looked
// into. Zero fields expect nothing. The policy fences every move, so a
// finding about one send never settles a later one.
type fence struct {
	attempt  AttemptID
	attempts int
}

// fenceOf returns the fence of u as it was read.
func fenceOf(u Uncertain) fence {
	if u.Subject.Kind == SubjectJournal {
		return fence{attempt: u.Attempt}
	}
	return fence{attempts: u.Attempts}
}

func (r *Recovery) settle(ctx context.Context, subject Subject, d Decision, f fence) error {
	if err := checkDecision(subject, d); err != nil {
		return err
	}
	if d.Verdict == VerdictUnresolved {
		return nil
	}
	var err error
	var name string
	switch subject.Kind {
	case SubjectJournal:
		name, err = r.settleEntry(ctx, subject, d, f)
	case SubjectOutbox:
		name, err = r.settleRow(ctx, subject, d, f)
	default:
		err = invalid("subject.kind", "a %v has no outcome to settle", subject.Kind)
	}
	if err != nil {
		return fmt.Errorf("settle %v %s: %w", subject.Kind, subject.Ref, err)
	}
	labels := Labels{Outcome: d.Verdict.String()}
	if subject.Kind == SubjectJournal {
		labels.Command = name
	} else {
		labels.Destination = name
	}
	if d.Verdict != VerdictEscalate { // escalated, it is still unknown: its settlement counts later
		r.obs.count(SignalExternalReconciled, labels)
	}
	r.obs.logf(ctx, slog.LevelInfo, "turnframe: uncertain outcome settled",
		slog.String("subject", subject.Kind.String()), slog.String("ref", subject.Ref),
		slog.String("verdict", d.Verdict.String()), slog.String("actor", string(d.Actor.orApp())))
	return nil
}

// checkDecision checks a Settle's input before anything is read.
func checkDecision(subject Subject, d Decision) error {
	if err := subject.Validate(); err != nil {
		return err
	}
	if d.Verdict > VerdictEscalate {
		return invalid("verdict", "%v is not a verdict", d.Verdict)
	}
	if err := CheckCode("code", d.Code); err != nil {
		return err
	}
	if d.Code == CodeApproved || d.Code == CodeDenied {
		return invalid("code", "%s is a decision's: Runtime.Approve and Deny settle an entry awaiting approval, Settle an uncertain outcome", d.Code)
	}
	if err := checkString("remote_ref", d.RemoteRef, 0, MaxRemoteRefLen); err != nil {
		return err
	}
	if d.Actor != "" {
		if err := d.Actor.Validate(); err != nil {
			return err
		}
	}
	return checkString("note", d.Note, 0, MaxNoteLen)
}

// settleEntry settles a journal entry by one Write with a reconciliation
// (a settlement without an attempt).
func (r *Recovery) settleEntry(ctx context.Context, subject Subject, d Decision, f fence) (string, error) {
	key := IdempotencyKey(subject.Ref)
	if err := key.ValidateStored(); err != nil {
		return "", prefixed("subject.ref", err)
	}
	s := Settlement{Key: key, Code: d.Code, RemoteRef: d.RemoteRef, Prior: f.attempt}
	s.To, _ = d.Verdict.JournalStatus() // d was validated: a verdict that moves
	if d.Verdict == VerdictResend {
		s.RemoteRef = "" // it runs again: no remote has it
	}
	e, err := r.store.ByKey(ctx, subject.Account, key)
	if err != nil {
		return "", err
	}
	for try := 1; ; try++ {
		// Fenced on the status read, so the move made is the one read
		// (a dead attempt settled straight from Executing is counted
		// unknown here, and one recovery declared unknown meanwhile is
		// not counted again); an entry moved since is read again.
		s.From = e.Status
		_, err = r.store.Apply(ctx, Write{
			Account: subject.Account, Turn: e.Turn, Settle: []Settlement{s},
			Actor: d.Actor, Note: d.Note, Now: r.cfg.now(),
		})
		if err == nil {
			if e.Status == JournalExecuting {
				// An attempt stranded on its abandoned turn, never
				// declared unknown, is counted so here.
				r.obs.count(SignalExternalOutcomeUnknown, deadAttemptLabels(e.Name))
			}
			return e.Name, nil
		}
		if !errors.Is(err, ErrConflict) && !errors.Is(err, ErrNotFound) {
			return e.Name, err // not a refusal: it may even have landed
		}
		again, rerr := r.store.ByKey(ctx, subject.Account, key)
		switch {
		case rerr != nil && errors.Is(err, ErrNotFound):
			// The entry exists (it was read above): ErrNotFound would say
			// it does not. What is known is the failed read.
			return e.Name, fmt.Errorf("%w (reading the entry again, after the store found it no longer in turn %v: %v)", rerr, e.Turn, err)
		case rerr != nil:
			// The refusal is most often the entry having moved since it
			// was read (the policy escalated it), and the decision is
			// tried again on the entry as it is: only the read would
			// say, and it failed (ErrBusy: try again).
			return e.Name, fmt.Errorf("%w (reading the entry again, after the store refused the settlement: %v)", rerr, err)
		case again.Turn != e.Turn && errors.Is(err, ErrNotFound):
			// A new turn's plan adopted it from its abandoned turn
			// meanwhile: it is no longer what was settled.
			return e.Name, fmt.Errorf("%w: turn %v adopted the entry while it was being settled: read it again", ErrConflict, again.Turn)
		case again.Status == e.Status || try == settleTries:
			return e.Name, err // refused for what it is, not for a move since the read
		}
		e = again
	}
}

// settleTries bounds how often Settle reads an entry again that moved
// between its read and its write.
const settleTries = 3

// settleRow resolves an outbox row, checking first that it is the
// account's.
func (r *Recovery) settleRow(ctx context.Context, subject Subject, d Decision, f fence) (string, error) {
	id, err := ParseOutboxID(subject.Ref)
	if err != nil {
		return "", prefixed("subject.ref", err)
	}
	rec, err := r.store.GetOutbox(ctx, id)
	if errors.Is(err, ErrNotFound) || (err == nil && rec.Account != subject.Account) {
		// Another tenant's row reads as absent, word for word.
		return "", fmt.Errorf("outbox row %v: %w", id, ErrNotFound)
	}
	if err != nil {
		return "", err
	}
	return rec.Destination, r.store.Resolve(ctx, Resolution{
		ID: id, Verdict: d.Verdict, Code: d.Code, RemoteRef: d.RemoteRef,
		Actor: d.Actor, Note: d.Note, Now: r.cfg.now(), Attempts: f.attempts,
	})
}
