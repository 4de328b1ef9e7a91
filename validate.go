package turnframe

import (
	"fmt"
	"reflect"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Size limits of the identifiers and strings the API takes, in bytes.
const (
	MaxAccountLen   = 128
	MaxCaseLen      = 200
	MaxKeyLen       = 255
	MaxNameLen      = 200 // command names, event types, destinations, order keys, workers, codes
	MaxTextLen      = 64 << 10
	MaxLimit        = 10000 // the largest limit a listing or claim accepts
	MaxRemoteRefLen = 1024
	// MaxTraceContextLen bounds OutboxMessage.TraceContext: a traceparent
	// is 55 bytes, which leaves room for a short tracestate.
	MaxTraceContextLen = 512
)

// checkString checks a string a store keeps as text: minLen–maxLen bytes
// of UTF-8 with no NUL byte (PostgreSQL's text cannot hold one, so no store
// takes it).
func checkString(field, s string, minLen, maxLen int) error {
	switch {
	case len(s) < minLen:
		return invalid(field, "empty")
	case len(s) > maxLen:
		return invalid(field, "%d bytes, more than %d", len(s), maxLen)
	case !utf8.ValidString(s):
		return invalid(field, "not valid UTF-8")
	}
	if i := strings.IndexByte(s, 0); i >= 0 {
		return invalid(field, "a NUL byte at %d", i)
	}
	return nil
}

// Validate returns ErrInvalid unless a is 1–128 bytes of UTF-8 without a NUL
// byte.
func (a AccountID) Validate() error { return checkString("account", string(a), 1, MaxAccountLen) }

// Validate returns ErrInvalid unless c is 1–200 bytes of UTF-8 without a NUL
// byte.
func (c CaseKey) Validate() error { return checkString("case", string(c), 1, MaxCaseLen) }

// OutboxKeySeparator joins a command's key and a row's position in the keys
// of a command's outbox rows when it enqueued several ("k~1", "k~2"; see
// OutboxKey). No command key contains it, so no row key of one command is
// the key of another.
const OutboxKeySeparator = '~'

// Validate returns ErrInvalid unless k is a key every remote receives as it
// is: 1–255 bytes of UTF-8, no control character anywhere, no white space at
// either end (HTTP trims the ends of a header value, so "k1" and "k1 " would
// reach a remote as one key), and no OutboxKeySeparator.
func (k IdempotencyKey) Validate() error {
	if err := checkString("key", string(k), 1, MaxKeyLen); err != nil {
		return err
	}
	s := string(k)
	if i := strings.IndexFunc(s, unicode.IsControl); i >= 0 {
		return invalid("key", "%q holds a control character at byte %d", s, i)
	}
	first, _ := utf8.DecodeRuneInString(s)
	last, _ := utf8.DecodeLastRuneInString(s)
	if unicode.IsSpace(first) || unicode.IsSpace(last) {
		return invalid("key", "%q begins or ends with white space", s)
	}
	if strings.ContainsRune(s, OutboxKeySeparator) {
		return invalid("key", "%q holds %q, which turnframe reserves for the keys of a command's outbox rows", s, OutboxKeySeparator)
	}
	return nil
}

// ValidateStored returns ErrInvalid unless k is a key a store may hold: 1–255
// bytes of UTF-8 without NUL. It is the check of every call that addresses a
// command already admitted (a settlement, ByKey, Approve, Recovery.Settle,
// the CLI), and it lets pass the keys an earlier release admitted that
// Validate now refuses (a '~', white space at an end: refused since schema
// 2), so that a file such a release wrote keeps every command movable.
// Admitting a command checks Validate.
func (k IdempotencyKey) ValidateStored() error { return checkString("key", string(k), 1, MaxKeyLen) }

// CheckLimit returns ErrInvalid naming field unless 1 ≤ n ≤ MaxLimit.
func CheckLimit(field string, n int) error {
	if n < 1 || n > MaxLimit {
		return invalid(field, "%d is not between 1 and %d", n, MaxLimit)
	}
	return nil
}

// CheckWorker returns ErrInvalid unless worker is a name the audit trail
// can record its claims under: 1–193 bytes of UTF-8 that Actor.Validate
// would accept as an actor (every rune printable, no space at either end),
// so that WorkerActor(worker), 7 bytes longer, is one. A worker id any store or Dispatcher accepts thus
// never has the record of one of its claims, settlements or late answers
// refused.
func CheckWorker(worker string) error {
	if err := checkString("worker", worker, 1, MaxNameLen-len(workerPrefix)); err != nil {
		return err
	}
	if err := Actor(worker).Validate(); err != nil {
		return invalid("worker", "%+q: the actor it names would be refused: %v", worker, err)
	}
	return nil
}

// CheckCode returns ErrInvalid naming field unless code is at most 200 bytes
// of UTF-8 without a NUL byte (it may be empty).
func CheckCode(field, code string) error { return checkString(field, code, 0, MaxNameLen) }

// CheckText returns ErrInvalid unless text is at most MaxTextLen (64 KiB)
// bytes of UTF-8 without a NUL byte: the ceiling every store keeps. Empty text is allowed: a
// voice turn may have none. A Runtime checks its configured limit instead
// (Limits.CheckText).
func CheckText(text string) error { return checkString("text", text, 0, MaxTextLen) }

// The range of times the stores take. Stores keep a time as integer Unix
// microseconds with 0 for "no time", and ids encode milliseconds since the
// Unix epoch, so a time must be at least one microsecond after the epoch;
// and it must print as a four-digit year, as RFC 3339 and JSON need.
var (
	MinTime = time.Unix(0, 1000).UTC()                                            // 1970-01-01T00:00:00.000001Z
	MaxTime = time.Date(9999, time.December, 31, 23, 59, 59, 999999000, time.UTC) // the last microsecond of 9999
)

// CheckTime returns ErrInvalid naming field unless t is given and between
// MinTime and MaxTime: every time the stores take (a write's now, a claim's
// now, a cut-off, a due time) must be, so that every accepted time reads back
// as itself.
func CheckTime(field string, t time.Time) error {
	if t.IsZero() {
		return invalid(field, "zero time")
	}
	return checkTimeRange(field, t)
}

// checkOptionalTime is CheckTime for a time that may be left zero.
func checkOptionalTime(field string, t time.Time) error {
	if t.IsZero() {
		return nil
	}
	return checkTimeRange(field, t)
}

func checkTimeRange(field string, t time.Time) error {
	if t.Before(MinTime) || t.After(MaxTime) {
		return invalid(field, "%s is outside %s … %s", t.UTC().Format(time.RFC3339Nano),
			MinTime.Format(time.RFC3339Nano), MaxTime.Format(time.RFC3339Nano))
	}
	return nil
}

// CheckLease returns ErrInvalid naming field unless lease is positive and a
// lease taken at now ends by MaxTime.
func CheckLease(field string, now time.Time, lease time.Duration) error {
	if lease <= 0 {
		return invalid(field, "%v is not a positive duration", lease)
	}
	if now.After(MaxTime.Add(-lease)) {
		return invalid(field, "a lease of %v from %s ends after %s", lease, now.UTC().Format(time.RFC3339Nano), MaxTime.Format(time.RFC3339Nano))
	}
	return nil
}

// CheckTurnRef returns ErrInvalid unless account is valid and turn is not the
// zero id: the check every call naming one turn starts with.
func CheckTurnRef(account AccountID, turn TurnID) error {
	if err := account.Validate(); err != nil {
		return err
	}
	return CheckID("turn", turn)
}

// CheckClaim checks the input of OutboxStore.ClaimDue: a time, a limit
// between 1 and MaxLimit, a worker, a lease. Bad input is ErrInvalid.
func CheckClaim(now time.Time, limit int, worker string, lease time.Duration) error {
	if err := CheckTime("now", now); err != nil {
		return err
	}
	if err := CheckLimit("limit", limit); err != nil {
		return err
	}
	if err := CheckWorker(worker); err != nil {
		return err
	}
	return CheckLease("lease", now, lease)
}

// CheckExtend checks the input of OutboxStore.ExtendClaims: each claim's
// fence (id, worker, attempt), a time and a lease. Bad input is ErrInvalid.
func CheckExtend(claims []Claim, now time.Time, lease time.Duration) error {
	for i, c := range claims {
		if err := c.validateFence(); err != nil {
			return prefixed(fmt.Sprintf("claims[%d]", i), err)
		}
	}
	if err := CheckTime("now", now); err != nil {
		return err
	}
	return CheckLease("lease", now, lease)
}

// Validate checks a Resolution before any transaction: a row id, a
// verdict that settles something, a code and a reference within bounds, an
// actor (or none), a note of at most MaxNoteLen bytes, a time. Bad input is
// ErrInvalid.
func (res Resolution) Validate() error {
	if err := CheckID("id", res.ID); err != nil {
		return err
	}
	if err := CheckVerdict(res.Verdict); err != nil {
		return err
	}
	if err := CheckCode("code", res.Code); err != nil {
		return err
	}
	if err := checkString("remote_ref", res.RemoteRef, 0, MaxRemoteRefLen); err != nil {
		return err
	}
	if res.Actor != "" {
		if err := res.Actor.Validate(); err != nil {
			return err
		}
	}
	if err := checkString("note", res.Note, 0, MaxNoteLen); err != nil {
		return err
	}
	if err := CheckFence("attempts", res.Attempts); err != nil {
		return err
	}
	return CheckTime("now", res.Now)
}

// CheckFence returns ErrInvalid naming field for a negative attempts fence
// (OutboxStore.Requeue, OutboxStore.ReleaseClaim, Resolution.Attempts): a
// fence is a row's Attempts as the caller saw it, or 0 for none.
func CheckFence(field string, attempts int) error {
	if attempts < 0 {
		return invalid(field, "%d is negative", attempts)
	}
	return nil
}

// CheckVerdict returns ErrInvalid unless v settles something: Completed,
// Failed, Resend or Escalate. VerdictUnresolved leaves a row or entry as it is and is
// never written.
func CheckVerdict(v Verdict) error {
	switch v {
	case VerdictCompleted, VerdictFailed, VerdictResend, VerdictEscalate:
		return nil
	}
	return invalid("verdict", "%v settles nothing", v)
}

// CheckID returns ErrInvalid naming field if id is the zero id.
func CheckID[K idKind](field string, id ID[K]) error {
	if id.IsZero() {
		return invalid(field, "zero id")
	}
	return nil
}

func prefixed(prefix string, err error) error {
	if ie, ok := err.(*InvalidError); ok {
		return &InvalidError{Field: prefix + "." + ie.Field, Reason: ie.Reason}
	}
	return err
}

// Validate checks cmd's key, case and name, and that its payload is at
// most MaxPayloadLen bytes. Bad input is ErrInvalid naming the field.
func (cmd Command) Validate() error {
	if err := cmd.Key.Validate(); err != nil {
		return err
	}
	if err := cmd.Case.Validate(); err != nil {
		return err
	}
	if err := checkString("name", cmd.Name, 1, MaxNameLen); err != nil {
		return err
	}
	return checkCeiling("payload", len(cmd.Payload), MaxPayloadLen, "MaxPayloadLen", "bytes")
}

// Validate checks m's destination, order key, trace context (at most
// MaxTraceContextLen bytes) and NotBefore (zero, or between MinTime and
// MaxTime), and that its payload is at most MaxPayloadLen bytes. Bad input
// is ErrInvalid naming the field.
func (m OutboxMessage) Validate() error {
	if err := checkString("destination", m.Destination, 1, MaxNameLen); err != nil {
		return err
	}
	if err := checkCeiling("payload", len(m.Payload), MaxPayloadLen, "MaxPayloadLen", "bytes"); err != nil {
		return err
	}
	if err := checkString("order_key", m.OrderKey, 0, MaxNameLen); err != nil {
		return err
	}
	if err := CheckTraceContext(m.TraceContext); err != nil {
		return err
	}
	return checkOptionalTime("not_before", m.NotBefore)
}

// Validate checks a replay record before a store keeps it: every answer
// basis one of the three, every loaded case valid, the response and the
// abandon code within their bounds. Bad input is ErrInvalid naming the
// field. A store that kept a basis it cannot read back would wedge the turn.
func (r ReplayRecord) Validate() error {
	if err := checkCeiling("loaded_cases", len(r.LoadedCases), MaxPlanCases, "MaxPlanCases", "cases"); err != nil {
		return err
	}
	if r.Understanding != nil {
		if err := checkCeiling("understanding.questions", len(r.Understanding.Questions), MaxPlanQuestions, "MaxPlanQuestions", "questions"); err != nil {
			return err
		}
		for i, q := range r.Understanding.Questions {
			if q.Basis > BasisGeneralDomainKnowledge {
				return invalid(fmt.Sprintf("understanding.questions[%d].basis", i), "%v is not an answer basis", q.Basis)
			}
		}
	}
	for i, c := range r.LoadedCases {
		if err := c.Validate(); err != nil {
			return prefixed(fmt.Sprintf("loaded_cases[%d]", i), err)
		}
	}
	if err := checkString("response", r.Response, 0, MaxTextLen); err != nil {
		return err
	}
	return CheckCode("abandon_code", r.AbandonCode)
}

// Validate checks everything about w that can be checked without reading the
// store. Bad input is ErrInvalid naming the field ("write.admit[1].key");
// a store calls it before its transaction starts, so nothing is written.
func (w Write) Validate() error {
	if err := w.validate(); err != nil {
		return prefixed("write", err)
	}
	return nil
}

func (w Write) validate() error {
	if err := w.Account.Validate(); err != nil {
		return err
	}
	if err := CheckID("turn", w.Turn); err != nil {
		return err
	}
	if err := CheckTime("now", w.Now); err != nil {
		return err
	}
	if w.Actor != "" {
		if err := w.Actor.Validate(); err != nil {
			return err
		}
	}
	if err := checkString("note", w.Note, 0, MaxNoteLen); err != nil {
		return err
	}
	if err := w.validateBegin(); err != nil {
		return err
	}
	if w.Phase > PhaseAbandoned {
		return invalid("phase", "%v is not a phase", w.Phase)
	}
	if w.Advance > PhaseAbandoned {
		return invalid("advance", "%v is not a phase", w.Advance)
	}
	if w.ExpectPhase > PhaseAbandoned {
		return invalid("expect_phase", "%v is not a phase", w.ExpectPhase)
	}
	if w.ExpectPhase != PhaseUnset && w.Begin != nil {
		return invalid("expect_phase", "a write that begins its turn expects no phase (%v)", w.ExpectPhase)
	}
	if w.Phase != PhaseUnset && w.Advance != PhaseUnset {
		return invalid("advance", "a write moves the phase (%v) or advances it if it may (%v), not both", w.Phase, w.Advance)
	}
	if w.Replay != nil {
		if err := w.Replay.Validate(); err != nil {
			return prefixed("replay", err)
		}
	}
	if err := w.validateAdmit(); err != nil {
		return err
	}
	commits, err := w.validateSettle()
	if err != nil {
		return err
	}
	if err := w.validateAbandon(); err != nil {
		return err
	}
	if (len(w.Events) > 0 || len(w.Outbox) > 0) && commits != 1 {
		return invalid("settle", "events and outbox rows need exactly one settlement to committed, found %d", commits)
	}
	return w.validateEffects()
}

func (w Write) validateBegin() error {
	if w.Begin == nil {
		return nil
	}
	b := w.Begin
	if b.Account != w.Account || b.ID != w.Turn {
		return invalid("begin", "turn %v of %q does not match the write's turn %v of %q", b.ID, b.Account, w.Turn, w.Account)
	}
	if err := CheckID("begin.conversation", b.Conversation); err != nil {
		return err
	}
	if err := checkOptionalTime("begin.received_at", b.ReceivedAt); err != nil {
		return err
	}
	if b.MessageID != "" {
		if err := b.MessageID.Validate(); err != nil {
			return prefixed("begin", err)
		}
	}
	return prefixed("begin", CheckText(b.Text))
}

func (w Write) validateAdmit() error {
	if err := checkCeiling("admit", len(w.Admit), MaxPlanCommands, "MaxPlanCommands", "commands"); err != nil {
		return err
	}
	seen := make(map[IdempotencyKey]bool, len(w.Admit))
	for i, cmd := range w.Admit {
		field := fmt.Sprintf("admit[%d]", i)
		if err := cmd.Validate(); err != nil {
			return prefixed(field, err)
		}
		if seen[cmd.Key] {
			return invalid(field+".key", "%q admitted twice in one write", cmd.Key)
		}
		seen[cmd.Key] = true
	}
	return nil
}

func (w Write) validateSettle() (commits int, err error) {
	seen := make(map[IdempotencyKey]bool, len(w.Settle))
	for i, s := range w.Settle {
		field := fmt.Sprintf("settle[%d]", i)
		if err := s.Key.ValidateStored(); err != nil { // it moves an admitted command
			return 0, prefixed(field, err)
		}
		if seen[s.Key] {
			return 0, invalid(field+".key", "%q settled twice in one write", s.Key)
		}
		seen[s.Key] = true
		if s.From > JournalAwaitingApproval {
			return 0, invalid(field+".from", "%v is not a journal status", s.From)
		}
		if s.To < JournalPending || s.To > JournalNeedsIntervention {
			return 0, invalid(field+".to", "%v is not a journal status", s.To)
		}
		if s.To == JournalExecuting {
			if err := CheckID(field+".attempt", s.Attempt); err != nil {
				return 0, err
			}
			if err := CheckLease(field+".lease", w.Now, s.Lease); err != nil {
				return 0, err
			}
		}
		if err := CheckCode(field+".code", s.Code); err != nil {
			return 0, err
		}
		if err := checkString(field+".remote_ref", s.RemoteRef, 0, MaxRemoteRefLen); err != nil {
			return 0, err
		}
		if s.To == JournalCommitted {
			commits++
		}
	}
	return commits, nil
}

// validateAbandon refuses a Write that abandons its turn and, in the same
// step, takes or resends one of its commands: storekit.NextEntry judges a settlement
// by the phase the turn had before the Write, and an abandoned turn never
// runs a command, so such an entry would silently never run.
func (w Write) validateAbandon() error {
	if w.Phase != PhaseAbandoned && w.Advance != PhaseAbandoned {
		return nil
	}
	for i, s := range w.Settle {
		if s.To == JournalPending || s.To == JournalExecuting {
			return invalid(fmt.Sprintf("settle[%d].to", i), "a write that abandons its turn moves no command to %v: it would never run", s.To)
		}
	}
	return nil
}

func (w Write) validateEffects() error {
	if err := checkCeiling("events", len(w.Events), MaxOutcomeEvents, "MaxOutcomeEvents", "events"); err != nil {
		return err
	}
	if err := checkCeiling("outbox", len(w.Outbox), MaxOutcomeMessages, "MaxOutcomeMessages", "outbox messages"); err != nil {
		return err
	}
	if err := checkCeiling("expect", len(w.Expect), MaxExpectedCases, "MaxExpectedCases", "cases"); err != nil {
		return err
	}
	for i, ev := range w.Events {
		field := fmt.Sprintf("events[%d]", i)
		if err := ev.Case.Validate(); err != nil {
			return prefixed(field, err)
		}
		if err := checkString(field+".type", ev.Type, 1, MaxNameLen); err != nil {
			return err
		}
		if err := checkCeiling(field+".data", len(ev.Data), MaxEventDataLen, "MaxEventDataLen", "bytes"); err != nil {
			return err
		}
	}
	for c := range w.Expect {
		if err := c.Validate(); err != nil {
			return prefixed("expect", err)
		}
	}
	for i, m := range w.Outbox {
		if err := m.Validate(); err != nil {
			return prefixed(fmt.Sprintf("outbox[%d]", i), err)
		}
	}
	return nil
}

// validateFence checks what a claim presents to hold its row: an id, a
// worker and an attempt number.
func (c Claim) validateFence() error {
	if err := CheckID("id", c.ID); err != nil {
		return err
	}
	if err := CheckWorker(c.Worker); err != nil {
		return err
	}
	if c.Attempts < 1 {
		return invalid("attempts", "%d: a claimed row has at least one attempt", c.Attempts)
	}
	return nil
}

// Validate checks a settlement before a store opens its transaction: a
// claim with an id, a worker and an attempt; a status a claim settles to; a
// time; a code, note and reference within bounds; no actor, or ActorPolicy.
// Bad input is ErrInvalid.
func (s OutboxSettlement) Validate() error {
	if err := s.Claim.validateFence(); err != nil {
		return prefixed("claim", err)
	}
	switch s.To {
	case OutboxCompleted, OutboxFailed, OutboxOutcomeUnknown:
	case OutboxPending:
		if err := CheckTime("retry_at", s.RetryAt); err != nil {
			return err
		}
	default:
		return invalid("to", "a claim does not settle to %v", s.To)
	}
	if err := CheckTime("now", s.Now); err != nil {
		return err
	}
	if err := CheckCode("code", s.Code); err != nil {
		return err
	}
	if s.Actor != "" && s.Actor != ActorPolicy {
		return invalid("actor", "%q settles no claim: only its worker (\"\") or %q does", s.Actor, ActorPolicy)
	}
	if err := checkString("note", s.Note, 0, MaxNoteLen); err != nil {
		return err
	}
	return checkString("remote_ref", s.RemoteRef, 0, MaxRemoteRefLen)
}

// Validate checks a listing filter: a known status or none, an account that
// is empty or valid, a limit between 1 and MaxLimit.
func (f OutboxFilter) Validate() error {
	if f.Status > OutboxNeedsIntervention {
		return invalid("status", "%v is not an outbox status", f.Status)
	}
	if f.Account != "" {
		if err := f.Account.Validate(); err != nil {
			return err
		}
	}
	return CheckLimit("limit", f.Limit)
}

// Validate checks a recovery scope: an account that is empty or valid, and a
// cut-off that is zero or in range.
func (s RecoveryScope) Validate() error {
	if s.Account != "" {
		if err := s.Account.Validate(); err != nil {
			return err
		}
	}
	return checkOptionalTime("updated_before", s.UpdatedBefore)
}

// isNil reports whether v, an implementation the application hands in (a
// Store, a Sender, a Handler, an Observer, a Verifier, a RecoveryHandler),
// is nil: the nil interface, or one holding a nil pointer or func — a nil
// *HTTPSender (NewHTTPSender's error ignored), a nil *sqlitestore.Store
// (Open's), a nil HandlerFunc — whose first call would panic.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Func:
		return rv.IsNil()
	}
	return false
}
