package turnframe

import (
	"strconv"
	"time"
)

// Codes the policy writes on the entries and rows it moves, and on the
// evidence it records (Remote, Recovery.Recover).
const (
	// CodeVerifiedHappened: a Verifier found the effect at the remote.
	CodeVerifiedHappened = "turnframe.policy.verified_happened"
	// CodeVerifiedNotHappened: a Verifier found the remote never received
	// it, so it was sent again (or, for a command of an abandoned turn,
	// rejected).
	CodeVerifiedNotHappened = "turnframe.policy.verified_not_happened"
	// CodeVerifyUnsure: evidence that a lookup could not tell (an answer
	// FoundUnsure, a panic, a hang, an answer out of range).
	CodeVerifyUnsure = "turnframe.policy.verify_unsure"
	// CodeVerifyExhausted: escalated after Remote.VerifyTries lookups that
	// could not tell.
	CodeVerifyExhausted = "turnframe.policy.verify_exhausted"
	// CodeResent: sent again under the same key to a remote that
	// deduplicates and still remembers it.
	CodeResent = "turnframe.policy.resent"
	// CodeResendsExhausted: escalated after Remote.Resends resends.
	CodeResendsExhausted = "turnframe.policy.resends_exhausted"
	// CodeKeyForgotten: escalated because the remote no longer remembers
	// the key (Remote.Deduplicates passed since the effect was created).
	CodeKeyForgotten = "turnframe.policy.key_forgotten"
	// CodeRerunWithheld: a command's attempt whose commit found its case
	// moved, settled unknown instead of re-run, because its Remote is
	// declared not to deduplicate: the re-run would repeat, under the same
	// key, a request the remote has already acted on.
	CodeRerunWithheld = "turnframe.policy.rerun_withheld"
	// CodeNoSafeResolution: escalated because the remote can neither be
	// asked nor deduplicate.
	CodeNoSafeResolution = "turnframe.policy.no_safe_resolution"
	// CodeUndeclaredResend: an outbox row whose claim's lease ended, to a
	// destination with no Remote declared, sent again under the same key
	// (at least once, as before policies existed).
	CodeUndeclaredResend = "turnframe.policy.undeclared_resend"
	// CodeLateAnswer: evidence of an answer that came after its deadline,
	// or after its claim was lost. It moves nothing.
	CodeLateAnswer = "turnframe.late_answer"
)

// stepKind is what the policy does next with one uncertain outcome.
type stepKind uint8

const (
	stepLeave    stepKind = iota // nothing the policy may do: undeclared, or needs a person already
	stepWait                     // not yet: a settle delay or a backoff runs until step.at
	stepVerify                   // ask the Verifier
	stepResend                   // send again under the same key
	stepEscalate                 // NeedsIntervention
)

// step is the policy's next move for one uncertain outcome.
type step struct {
	kind stepKind
	at   time.Time // stepWait: when to look again
	code string    // stepResend, stepEscalate: the code to write
	note string    // for the audit trail
}

// trail is what the audit trail says about one uncertain outcome.
type trail struct {
	tries   int       // lookups that could not tell since it last became unknown, about the attempt it became unknown at
	lastTry time.Time // when the last of them was recorded
	resends int       // resends the policy made of it, ever
}

// trailOf reads a subject's history, oldest first. A lookup counts only
// for the attempt it was about (its record's Attempt, the attempt whose
// outcome it looked up): a slow lookup of an earlier attempt, recorded after
// the subject was sent again and became unknown again, is not held against
// the new attempt.
func trailOf(history []HistoryRecord) trail {
	var t trail
	var about string // the attempt the subject last became unknown at
	for _, h := range history {
		switch {
		case !h.Evidence && h.To == JournalOutcomeUnknown.String():
			t.tries, t.lastTry = 0, time.Time{} // became unknown (again): lookups start over
			about = h.Attempt
		case h.Evidence && h.Actor == ActorPolicy && h.Code == CodeVerifyUnsure && h.Attempt == about:
			t.tries++
			t.lastTry = h.At
		case !h.Evidence && h.Actor == ActorPolicy && h.To == JournalPending.String():
			t.resends++
		}
	}
	return t
}

// resendsOf returns how many of u's automatic resends are spent. For an
// outbox row it is the policy's resends (t.resends): its other attempts are
// sends the remote answered retryable, not resends of an unknown. For a
// command every attempt after the first counts, since each re-ran an
// effect that may have happened — Execute taking over an attempt that died
// as much as the policy's resend (or a person's) — so that Remote.Resends
// bounds them all together, as Execute's own check does (rerunForbidden).
func resendsOf(u Uncertain, t trail) int {
	if u.Subject.Kind == SubjectJournal {
		return max(t.resends, u.Attempts-1)
	}
	return t.resends
}

// verifyBackoff is the wait after the tries-th lookup that could not tell:
// base, doubling, at most maxVerifyBackoff.
func verifyBackoff(base time.Duration, tries int) time.Duration {
	d := base
	for i := 1; i < tries && d < maxVerifyBackoff; i++ {
		d *= 2
	}
	return min(d, maxVerifyBackoff)
}

// nextStep decides what the policy does with u now, given its Remote (and
// whether one was declared) and its trail. It is the whole policy; Recover
// carries it out.
func nextStep(r Remote, declared bool, u Uncertain, t trail, now time.Time) step {
	if u.Status != JournalOutcomeUnknown.String() {
		return step{kind: stepLeave} // needs a person: the policy never moves it
	}
	if !declared {
		if u.Subject.Kind == SubjectOutbox && u.Code == CodeLeaseEnded {
			return step{kind: stepResend, code: CodeUndeclaredResend,
				note: "claim's lease ended; no Remote declared for the destination: sent again under the same key (at least once)"}
		}
		return step{kind: stepLeave}
	}
	switch r.Kind() {
	case RemoteVerifiable:
		return verifyStep(r, u, t, now)
	case RemoteDeduplicates:
		switch {
		case resendsOf(u, t) >= r.Resends:
			return step{kind: stepEscalate, code: CodeResendsExhausted, note: "the remote deduplicates, but the resends allowed are spent"}
		case !r.reachesInWindow(u.Created, now, 0):
			return step{kind: stepEscalate, code: CodeKeyForgotten, note: "the remote deduplicates, but no longer remembers the key"}
		case u.Code == CodeKeyForgotten:
			// A resend of the policy's that its send point withheld: it
			// would have reached the remote after the window closed. A
			// resend now would reach it later still.
			return step{kind: stepEscalate, code: CodeKeyForgotten,
				note: "the remote deduplicates, but a resend could no longer reach it before it forgets the key"}
		}
		return step{kind: stepResend, code: CodeResent, note: "the remote deduplicates and still remembers the key: sent again under it"}
	}
	return step{kind: stepEscalate, code: CodeNoSafeResolution, note: "the remote can neither be asked nor deduplicate: a person must decide"}
}

// verifyStep is nextStep for a remote that can be asked.
func verifyStep(r Remote, u Uncertain, t trail, now time.Time) step {
	switch {
	case t.tries >= r.VerifyTries:
		return step{kind: stepEscalate, code: CodeVerifyExhausted, note: "the remote could not tell after every lookup allowed"}
	case t.tries == 0 && now.Before(u.Since.Add(r.SettleDelay)):
		return step{kind: stepWait, at: u.Since.Add(r.SettleDelay)}
	case t.tries > 0 && now.Before(t.lastTry.Add(verifyBackoff(r.VerifyBackoff, t.tries))):
		return step{kind: stepWait, at: t.lastTry.Add(verifyBackoff(r.VerifyBackoff, t.tries))}
	}
	return step{kind: stepVerify}
}

// UncertainEntry returns the Uncertain view of a journal entry.
func UncertainEntry(e JournalEntry) Uncertain {
	return Uncertain{
		Subject: JournalSubject(e.Account, e.Key), Name: e.Name, Key: e.Key, Turn: e.Turn, Case: e.Case,
		Payload: e.Payload, Attempts: e.Attempts, Attempt: e.Attempt, Status: e.Status.String(), Code: e.Code, RemoteRef: e.RemoteRef,
		Created: e.AdmittedAt, Since: e.UpdatedAt,
	}
}

// attemptName is the attempt u's outcome is unknown at, as the audit trail
// names it (HistoryRecord.Attempt): a command's attempt id, a row's attempt
// number.
func (u Uncertain) attemptName() string {
	switch {
	case u.Subject.Kind == SubjectOutbox && u.Attempts > 0:
		return strconv.Itoa(u.Attempts)
	case u.Subject.Kind == SubjectJournal && !u.Attempt.IsZero():
		return u.Attempt.String()
	}
	return ""
}

// UncertainRow returns the Uncertain view of an outbox row.
func UncertainRow(r OutboxRecord) Uncertain {
	return Uncertain{
		Subject: OutboxSubject(r.Account, r.ID), Name: r.Destination, Key: r.Key, RemoteKey: r.RemoteKey(), Turn: r.Turn,
		Payload: r.Payload, Attempts: r.Attempts, Status: r.Status.String(), Code: r.LastCode, RemoteRef: r.RemoteRef,
		Created: r.CreatedAt, Since: r.UpdatedAt,
	}
}
