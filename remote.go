package turnframe

import (
	"context"
	"time"
)

// Remote says what the system behind an outbox destination or a command can
// do about an effect whose outcome is unknown, and so how recovery resolves
// one (DESIGN.md, "Uncertain outcomes"). Declare it once per destination
// (WithDestination) and per command name (WithCommand). The zero Remote is
// a remote that can do neither: its unknowns go to a person
// (NeedsIntervention) and are never resent. A destination or command with
// no declaration at all is not resolved by policy: its unknowns wait for
// Settle, as before policies existed — except an outbox row whose claim's
// lease ended, which is sent again under the same key (at least once).
//
// In the order the policy tries them:
//
//  1. Verifier set: ask it, after SettleDelay, at most VerifyTries times
//     with VerifyBackoff between tries. Happened settles the effect done,
//     NotHappened resends it, at most Resends times, then escalates (a
//     command of an abandoned turn: rejects it); an answer that cannot tell, a panic, a hang past
//     VerifyTimeout or an answer out of range is one more try. After the
//     last try it escalates. A verifier is never followed by a blind resend.
//  2. Deduplicates set: resend under the same key while the remote still
//     remembers it — the effect was created (enqueued or admitted) less
//     than Deduplicates ago — at most Resends times; then escalate. The
//     window holds where the resend runs too, and there it is judged by
//     when the resend may arrive, not when it starts: a resend runs only
//     if now + its bound is before created + Deduplicates, its bound being
//     the longest its call may take — the command timeout
//     (WithCommandTimeout) for Execute's take-up of a resend, and for its
//     take-over of an attempt that died, and SendTimeout for a Dispatcher's
//     send of a claimed resend. One that fails this (taken up or claimed
//     late, or near the window's end) is withheld, unknown again with
//     CodeKeyForgotten, and escalated by the next Recover, though the
//     window may still run; a dead attempt that fails it is declared
//     unknown instead of taken over. The policy itself, which knows no
//     call's bound, judges the window at the moment it resends. A send
//     point judges by the Remote declared to it: a resend the policy made
//     under a declaration a restart replaced with one of a remote that
//     does not deduplicate (it can be asked, or can do neither) is
//     withheld the same way, for the new Remote's policy to resolve; with
//     no Remote declared any more, it is sent.
//  3. Neither: escalate at once.
//
// A declared Remote that does not deduplicate (one that can only be
// asked, or can do neither) also stops Execute's re-run of a handler whose
// commit found its case moved: the re-run would repeat the first call's
// request, and the remote act again. The attempt is settled unknown
// instead (CodeRerunWithheld), for the policy above.
type Remote struct {
	// Deduplicates is how long the remote remembers an idempotency key:
	// a request repeated under a key it remembers is answered as the first
	// was, and not done again. Zero or negative: it does not deduplicate. It is
	// counted from the effect's creation (admission or enqueue), never
	// later than the remote's first receipt, and a resend must reach the
	// remote within it: one is sent only if it starts at least its call's
	// bound (the command timeout, or SendTimeout) before Deduplicates has
	// passed (see item 2 above). A window shorter than that bound allows
	// no resend at all.
	Deduplicates time.Duration
	// Resends bounds the automatic resends of one effect: to a remote that
	// deduplicates, and to one that can be asked once a lookup found the
	// effect never arrived (a remote that never answers a send would
	// otherwise be sent to for ever). For a command every attempt after its first counts —
	// Execute taking over an attempt that died, the policy's resend, a
	// person's — so a command runs at most 1 + Resends times before the
	// policy escalates; for an outbox row, the policy's resends count (a
	// send the remote answered retryable is no resend of an unknown). Zero
	// or negative: DefaultResends.
	Resends int
	// Verifier, if not nil, looks an effect up by key. A nil pointer or
	// func behind it is nil too: the remote cannot be asked.
	Verifier Verifier
	// SettleDelay is how long after the outcome became unknown the first
	// lookup waits, for remotes whose lookups lag behind their writes.
	// Zero or negative: no wait.
	SettleDelay time.Duration
	// VerifyTries bounds the lookups of one unknown before it escalates.
	// Zero or negative: DefaultVerifyTries.
	VerifyTries int
	// VerifyBackoff is the wait after a lookup that could not tell; it
	// doubles after each, and no wait is longer than a minute (a longer
	// VerifyBackoff waits a minute from the first). Zero or negative:
	// DefaultVerifyBackoff.
	VerifyBackoff time.Duration
	// VerifyTimeout bounds one lookup. Zero or negative:
	// DefaultVerifyTimeout.
	VerifyTimeout time.Duration
}

// Defaults of a Remote's bounds.
const (
	DefaultResends       = 3
	DefaultVerifyTries   = 5
	DefaultVerifyBackoff = time.Second
	DefaultVerifyTimeout = 10 * time.Second
	maxVerifyBackoff     = time.Minute
)

// RemoteKind is what a Remote can do, as its policy sees it.
type RemoteKind uint8

const (
	// RemoteUndeclared: no Remote was declared; no policy applies.
	RemoteUndeclared RemoteKind = iota
	// RemoteNeither: it can be neither asked nor sent the same key twice.
	RemoteNeither
	// RemoteDeduplicates: it remembers keys for a while.
	RemoteDeduplicates
	// RemoteVerifiable: it can be asked (with or without deduplication).
	RemoteVerifiable
)

var remoteKindNames = [...]string{"undeclared", "neither", "deduplicates", "verifiable"}

// String returns the kind in snake case.
func (k RemoteKind) String() string { return enumName(remoteKindNames[:], int(k), "remote kind") }

// Kind returns what r can do.
func (r Remote) Kind() RemoteKind {
	switch {
	case !isNil(r.Verifier):
		return RemoteVerifiable
	case r.Deduplicates > 0:
		return RemoteDeduplicates
	}
	return RemoteNeither
}

// withDefaults returns r with every bound left zero or negative at its
// default.
func (r Remote) withDefaults() Remote {
	r.Resends = positiveOr(r.Resends, DefaultResends)
	r.VerifyTries = positiveOr(r.VerifyTries, DefaultVerifyTries)
	r.VerifyBackoff = positiveOr(r.VerifyBackoff, DefaultVerifyBackoff)
	r.VerifyTimeout = positiveOr(r.VerifyTimeout, DefaultVerifyTimeout)
	return r
}

// Finding is what a Verifier found at the remote.
type Finding uint8

const (
	// FoundUnsure: the remote cannot tell (yet). The zero value, so a
	// Verifier that returns Verification{} has said nothing.
	FoundUnsure Finding = iota
	// FoundHappened: the remote has the effect.
	FoundHappened
	// FoundNotHappened: the remote is certain it never received it.
	FoundNotHappened
)

var findingNames = [...]string{"unsure", "happened", "not_happened"}

// String returns the finding in snake case.
func (f Finding) String() string { return enumName(findingNames[:], int(f), "finding") }

// Verification is a Verifier's answer.
type Verification struct {
	Found     Finding
	RemoteRef string // FoundHappened: the remote's reference, if any (at most 1024 bytes)
	Code      string // a short stable reason, kept in the audit trail at the head of the record's note, in parentheses
	Note      string // free text for the audit trail; invalid UTF-8 and NUL bytes are replaced, and code and note are cut to 1024 bytes
}

// Uncertain is one effect whose outcome is unknown, as a Verifier and the
// audit trail see it: a command's journal entry or an outbox row.
type Uncertain struct {
	Subject Subject // SubjectJournal (Ref: the key) or SubjectOutbox (Ref: the row id)
	// Name is the command's name or the row's destination: what the
	// Remote was declared for.
	Name string
	// Key is the idempotency key the remote was given: the command's key,
	// or the row's key. RemoteKey is the row's OutboxEntry.RemoteKey (the
	// value HTTPSender sends); for a command, "" (its handler chose what
	// to send).
	Key       IdempotencyKey
	RemoteKey string
	Turn      TurnID
	Case      CaseKey // a command's case; "" for a row
	Payload   []byte
	Attempts  int       // the attempts started (a row's attempt number)
	Attempt   AttemptID // a command's attempt whose outcome is unknown; zero for a row
	Status    string    // "outcome_unknown" or "needs_intervention"
	Code      string    // why it is unknown (e.g. CodeLeaseEnded, CodeSendTimeout)
	RemoteRef string
	Created   time.Time // when it was admitted or enqueued
	Since     time.Time // when it last changed
}

// Verifier looks an effect up at its remote by key. It is called under a
// context that ends after Remote.VerifyTimeout and must honour it: an
// answer given after that is discarded (and recorded as evidence), as is a
// panic's. Answer FoundNotHappened only when the remote is certain it never
// received the request: that answer sends it again.
type Verifier interface {
	Verify(ctx context.Context, u Uncertain) Verification
}

// VerifierFunc adapts a function to a Verifier.
type VerifierFunc func(ctx context.Context, u Uncertain) Verification

// Verify calls f(ctx, u).
func (f VerifierFunc) Verify(ctx context.Context, u Uncertain) Verification { return f(ctx, u) }

// WithDestination declares what the remote behind outbox destination dest
// can do (see Remote). Later declarations of one destination replace
// earlier ones. NewRecovery and NewDispatcher honour it.
func WithDestination(dest string, r Remote) Option {
	return func(s *settings) {
		if s.destinations == nil {
			s.destinations = make(map[string]Remote)
		}
		s.destinations[dest] = r
	}
}

// WithCommand declares what the remote a command named name calls can do
// (see Remote). New, NewRecovery and NewDispatcher honour it.
func WithCommand(name string, r Remote) Option {
	return func(s *settings) {
		if s.commands == nil {
			s.commands = make(map[string]Remote)
		}
		s.commands[name] = r
	}
}

// rerunForbidden reports whether e is an attempt that died (Executing, its
// lease ended at now) of a command whose declared Remote forbids running it
// again blindly: one that can be asked (ask first), one that can do
// neither, or one that deduplicates but has had its resends or would no
// longer remember the key when a rerun started now reaches it (within the
// command timeout; Remote.reachesInWindow). Undeclared commands are run
// again, as before policies.
func (s settings) rerunForbidden(e JournalEntry, now time.Time) bool {
	return e.Status == JournalExecuting && !e.LeaseUntil.After(now) && s.takeOverForbidden(e, now)
}

// takeOverForbidden reports whether e, Executing under an attempt, may
// never be taken over by a new one, whether or not its lease has ended:
// its declared Remote forbids running a dead attempt again blindly (see
// rerunForbidden). At a remote that deduplicates, a rerun started at now
// may call the handler for the command timeout, and is forbidden unless
// it reaches the remote within the window (Remote.reachesInWindow).
// Execute then never asks the store for a take of e at all
// (execution.run): the store judges the lease on its own clock (the
// database's, for pgstore), so a take sent while this runtime's clock said
// the lease ran could land after the store's said it ended, and run a
// dead attempt again at a remote that cannot tell.
func (s settings) takeOverForbidden(e JournalEntry, now time.Time) bool {
	remote, declared := s.remoteFor(SubjectJournal, e.Name)
	switch {
	case !declared:
		return false
	case remote.Kind() != RemoteDeduplicates:
		return true
	}
	return e.Attempts > remote.Resends || !remote.reachesInWindow(e.AdmittedAt, now, s.commandTimeout)
}

// resendLapsed reports whether e is a resend the policy allowed to a
// remote that deduplicates (Pending again, CodeResent) that is taken up at
// now too late: its handler, called for up to the command timeout, may
// reach the remote only after it stopped remembering the key
// (Remote.reachesInWindow) — the turn was abandoned and a new turn adopted
// the command later, or the turn's resumption failed and a later pass runs
// it, or it is simply taken up near the window's end. Run then, it could
// be the blind resend the policy itself refuses past the window (nextStep:
// CodeKeyForgotten), so Execute withholds it (execution.withholdResend).
// The Remote is the one declared now, which may not be the one the policy
// resent under (the process restarted with its declaration changed): a
// command now declared a remote that does not deduplicate at all — one
// that can be asked, or can do neither — has its resend withheld too, for
// that Remote's policy to resolve; an undeclared one runs, as before
// policies.
func (s settings) resendLapsed(e JournalEntry, now time.Time) bool {
	if e.Status != JournalPending || e.Code != CodeResent {
		return false
	}
	remote, declared := s.remoteFor(SubjectJournal, e.Name)
	return declared && !remote.remembersOnArrival(e.AdmittedAt, now, s.commandTimeout)
}

// callInWindow reports whether a handler call of command name, started at
// now and repeating a request its remote may have held the key of since
// since, reaches the remote while it remembers the key: true unless the
// command is declared a remote that deduplicates (Remote.reachesInWindow,
// bound the command timeout). Execute asks it before every call of an
// attempt that took up a resend or took over a dead attempt (since: the
// admission), and before every re-run after a commit conflict (since, for
// a first send: the attempt's first call), so that store latency after the
// take-up, or a re-run, does not carry a call past the window. A remote
// that can be asked and deduplicates too is judged by its window here as
// well: the call repeats the request, and no lookup comes before it.
func (s settings) callInWindow(name string, since, now time.Time) bool {
	remote, declared := s.remoteFor(SubjectJournal, name)
	return !declared || remote.Deduplicates <= 0 || remote.reachesInWindow(since, now, s.commandTimeout)
}

// reachesInWindow reports whether a request under the key of an effect
// created at created, started at now and bound to reach the remote within
// bound, reaches it while the remote still remembers the key: now + bound
// is before created + Deduplicates. It is the one rule of the window,
// judged wherever a resend to a remote that deduplicates is decided or
// carried out. The bound is the longest the request's call may run: for a
// command, the command timeout (WithCommandTimeout), under which its
// handler is called; for an outbox row, the Dispatcher's SendTimeout. The
// policy (nextStep) knows no call's bound and judges the window at its
// start (bound zero); the send points — Execute's take-up of a resend and
// its take-over of a dead attempt, the Dispatcher's send of a claimed
// resend — judge it with theirs, and withhold what would arrive too late.
// A request that outruns its bound (a handler or Sender that ignores its
// context) is not covered: the bound is the contract. A bound of
// math.MaxInt64, no timeout, never reaches a finite window.
func (r Remote) reachesInWindow(created, now time.Time, bound time.Duration) bool {
	// Sub saturates where Add of a huge bound could pass a window end far
	// away; both sides stay comparable whatever the durations.
	return created.Add(r.Deduplicates).Sub(now) > max(bound, 0)
}

// rerunBlind reports whether command name is declared a remote that does
// not deduplicate (it can be asked, or can do neither): a re-run of its
// handler after a commit conflict repeats, under the same key, a request
// the remote has acted on, and the remote acts again. Execute withholds
// such a re-run (execution.callInWindow); an undeclared command is re-run,
// as before policies.
func (s settings) rerunBlind(name string) bool {
	remote, declared := s.remoteFor(SubjectJournal, name)
	return declared && remote.Deduplicates <= 0
}

// remembersOnArrival reports whether r deduplicates at all (Deduplicates
// set, whether or not it can also be asked) and a request under the key of
// an effect created at created, started at now and bound to arrive within
// bound, reaches it within its window (reachesInWindow).
func (r Remote) remembersOnArrival(created, now time.Time, bound time.Duration) bool {
	return r.Deduplicates > 0 && r.reachesInWindow(created, now, bound)
}

// remoteFor returns the Remote declared for subject kind k and name, and
// whether one was.
func (s settings) remoteFor(k SubjectKind, name string) (Remote, bool) {
	var r Remote
	var ok bool
	switch k {
	case SubjectOutbox:
		r, ok = s.destinations[name]
	case SubjectJournal:
		r, ok = s.commands[name]
	}
	return r.withDefaults(), ok
}
