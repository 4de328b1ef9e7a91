package turnframe

import (
	"fmt"
	"time"
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
)

func checkString(field, s string, minLen, maxLen int) error {
	switch {
	case len(s) < minLen:
		return invalid(field, "empty")
	case len(s) > maxLen:
		return invalid(field, "%d bytes, more than %d", len(s), maxLen)
	case !utf8.ValidString(s):
		return invalid(field, "not valid UTF-8")
	}
	return nil
}

// Validate returns ErrInvalid unless a is 1–128 bytes of UTF-8.
func (a AccountID) Validate() error { return checkString("account", string(a), 1, MaxAccountLen) }

// Validate returns ErrInvalid unless c is 1–200 bytes of UTF-8.
func (c CaseKey) Validate() error { return checkString("case", string(c), 1, MaxCaseLen) }

// Validate returns ErrInvalid unless k is 1–255 bytes of UTF-8.
func (k IdempotencyKey) Validate() error { return checkString("key", string(k), 1, MaxKeyLen) }

// CheckLimit returns ErrInvalid naming field unless 1 ≤ n ≤ MaxLimit.
func CheckLimit(field string, n int) error {
	if n < 1 || n > MaxLimit {
		return invalid(field, "%d is not between 1 and %d", n, MaxLimit)
	}
	return nil
}

// CheckWorker returns ErrInvalid unless worker is 1–200 bytes of UTF-8.
func CheckWorker(worker string) error { return checkString("worker", worker, 1, MaxNameLen) }

// CheckCode returns ErrInvalid naming field unless code is at most 200 bytes
// of UTF-8 (it may be empty).
func CheckCode(field, code string) error { return checkString(field, code, 0, MaxNameLen) }

// CheckText returns ErrInvalid unless text is at most 64 KiB of UTF-8. Empty
// text is allowed: a voice turn may have none.
func CheckText(text string) error { return checkString("text", text, 0, MaxTextLen) }

// CheckTime returns ErrInvalid naming field if t is the zero time: every
// time the stores take (a write's now, a claim's now, a cut-off) must be
// given.
func CheckTime(field string, t time.Time) error {
	if t.IsZero() {
		return invalid(field, "zero time")
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
// between 1 and MaxLimit, a worker. Bad input is ErrInvalid.
func CheckClaim(now time.Time, limit int, worker string) error {
	if err := CheckTime("now", now); err != nil {
		return err
	}
	if err := CheckLimit("limit", limit); err != nil {
		return err
	}
	return CheckWorker(worker)
}

// CheckResolve checks the input of OutboxStore.Resolve: a row id, a verdict
// that settles something, a code within bounds, a time. Bad input is
// ErrInvalid.
func CheckResolve(id OutboxID, v Verdict, code string, now time.Time) error {
	if err := CheckID("id", id); err != nil {
		return err
	}
	if err := CheckVerdict(v); err != nil {
		return err
	}
	if err := CheckCode("code", code); err != nil {
		return err
	}
	return CheckTime("now", now)
}

// CheckVerdict returns ErrInvalid unless v settles something: Completed,
// Failed or Resend. VerdictUnresolved leaves a row or entry as it is and is
// never written.
func CheckVerdict(v Verdict) error {
	switch v {
	case VerdictCompleted, VerdictFailed, VerdictResend:
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

// Validate checks cmd's key, case and name. Bad input is ErrInvalid naming
// the field.
func (cmd Command) Validate() error {
	if err := cmd.Key.Validate(); err != nil {
		return err
	}
	if err := cmd.Case.Validate(); err != nil {
		return err
	}
	return checkString("name", cmd.Name, 1, MaxNameLen)
}

// Validate checks m's destination and order key. Bad input is ErrInvalid
// naming the field.
func (m OutboxMessage) Validate() error {
	if err := checkString("destination", m.Destination, 1, MaxNameLen); err != nil {
		return err
	}
	return checkString("order_key", m.OrderKey, 0, MaxNameLen)
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
	if err := w.validateBegin(); err != nil {
		return err
	}
	if w.Phase > PhaseAbandoned {
		return invalid("phase", "%v is not a phase", w.Phase)
	}
	if err := w.validateAdmit(); err != nil {
		return err
	}
	commits, err := w.validateSettle()
	if err != nil {
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
	return prefixed("begin", CheckText(b.Text))
}

func (w Write) validateAdmit() error {
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
		if err := s.Key.Validate(); err != nil {
			return 0, prefixed(field, err)
		}
		if seen[s.Key] {
			return 0, invalid(field+".key", "%q settled twice in one write", s.Key)
		}
		seen[s.Key] = true
		if s.To < JournalPending || s.To > JournalOutcomeUnknown {
			return 0, invalid(field+".to", "%v is not a journal status", s.To)
		}
		if s.To == JournalExecuting {
			if err := CheckID(field+".attempt", s.Attempt); err != nil {
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

func (w Write) validateEffects() error {
	for i, ev := range w.Events {
		field := fmt.Sprintf("events[%d]", i)
		if err := ev.Case.Validate(); err != nil {
			return prefixed(field, err)
		}
		if err := checkString(field+".type", ev.Type, 1, MaxNameLen); err != nil {
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

// Validate checks a settlement before a store opens its transaction: a
// claim with an id, a worker and an attempt; a status a claim settles to; a
// time; a code and reference within bounds. Bad input is ErrInvalid.
func (s OutboxSettlement) Validate() error {
	if err := CheckID("claim.id", s.Claim.ID); err != nil {
		return err
	}
	if err := CheckWorker(s.Claim.Worker); err != nil {
		return err
	}
	if s.Claim.Attempts < 1 {
		return invalid("claim.attempts", "%d: a claimed row has at least one attempt", s.Claim.Attempts)
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
	return checkString("remote_ref", s.RemoteRef, 0, MaxRemoteRefLen)
}

// Validate checks a listing filter: a known status or none, an account that
// is empty or valid, a limit between 1 and MaxLimit.
func (f OutboxFilter) Validate() error {
	if f.Status > OutboxOutcomeUnknown {
		return invalid("status", "%v is not an outbox status", f.Status)
	}
	if f.Account != "" {
		if err := f.Account.Validate(); err != nil {
			return err
		}
	}
	return CheckLimit("limit", f.Limit)
}

// Validate checks a recovery scope: an account that is empty or valid.
func (s RecoveryScope) Validate() error {
	if s.Account != "" {
		return s.Account.Validate()
	}
	return nil
}
