package turnframe

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"
)

// OutboxMessage is an effect a committing command asks to send. Store.Apply
// enqueues it Pending in the same transaction as the command's events.
type OutboxMessage struct {
	Destination string    // where the sender sends it, e.g. "payments"; 1–200 bytes
	Payload     []byte    // the body, opaque here
	OrderKey    string    // optional: strict enqueue order among this account's rows of this key
	NotBefore   time.Time // optional: not due before this time (at most MaxTime; a row due after MaxTime less a claim's lease is never claimed)
	// TraceContext is optional: the trace the enqueuing request belongs to,
	// for a Sender to link its send to (otelturnframe.WrapSender), e.g. a
	// W3C traceparent, optionally followed by ";" and a tracestate. It is
	// opaque here: stored and handed back to the Sender as it was given,
	// never parsed. At most MaxTraceContextLen bytes of UTF-8 without NUL;
	// WithTraceContext fills it from the caller's context when empty. In a
	// handler's Commit, a value that breaks the rule is dropped, with a
	// warning: tracing never costs the commit.
	TraceContext string
}

// OutboxEntry is what a Sender is handed: one row and the key it must
// forward to the remote.
type OutboxEntry struct {
	ID      OutboxID
	Account AccountID
	Turn    TurnID
	// Key is the row's idempotency key: the key of the command that
	// enqueued it, or that key with the row's position ("k~1", "k~2", …)
	// when the command enqueued several (OutboxKey), so a resumed command
	// produces the same keys. Unique per account, and per account only:
	// see RemoteKey.
	Key         IdempotencyKey
	Destination string
	Payload     []byte
	OrderKey    string
	// Attempts counts the attempts started, this one included once claimed.
	// It only grows: a claim's fence never repeats.
	Attempts int
	// AttemptBase is the number of attempts made before the current attempt
	// budget began: 0, or Attempts at the row's last Requeue, plus one for
	// each claim since put back unsent (CodeNotSent: it spent nothing). The
	// dispatcher gives a row MaxAttempts attempts per budget.
	AttemptBase int
	CreatedAt   time.Time
	// TraceContext is OutboxMessage.TraceContext as the row was enqueued
	// with it, "" when it had none.
	TraceContext string
}

// RemoteKey returns the row's key qualified by its account, for a remote
// that several tenants share: two accounts may both use the key "k1", and a
// shared remote must not take the second for a replay of the first.
//
// It is deterministic (every resend carries the same value), injective
// (distinct account and key pairs never give one value), at most 255 bytes,
// and safe as an HTTP header value: printable ASCII, never beginning or
// ending with white space, so no transport trims or rewrites it. Its forms:
//
//	"LEN.ACCOUNT.KEY"    both printable ASCII (LEN is the account's length in bytes)
//	"xLEN.ACCOUNT.KEY"   otherwise, each percent-encoded (every byte outside '!'…'~', and '%')
//	64 hex digits        the SHA-256 of "LEN.ACCOUNT.KEY" (raw), when the form above is longer than 255 bytes
//
// The forms cannot meet: the first begins with a digit, the second with
// 'x', and neither hash holds a '.'. A sender whose remote is per tenant may
// forward Key instead.
func (e OutboxEntry) RemoteKey() string {
	account, key := string(e.Account), string(e.Key)
	var v string
	if printableASCII(account) && printableASCII(key) && !strings.HasSuffix(key, " ") {
		v = strconv.Itoa(len(account)) + "." + account + "." + key
	} else {
		acc := percentEncode(account)
		v = "x" + strconv.Itoa(len(acc)) + "." + acc + "." + percentEncode(key)
	}
	if len(v) <= MaxKeyLen {
		return v
	}
	sum := sha256.Sum256([]byte(strconv.Itoa(len(account)) + "." + account + "." + key))
	return hex.EncodeToString(sum[:])
}

// printableASCII reports whether s holds only the bytes ' ' to '~'.
func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// percentEncode writes every byte of s outside '!'…'~', and '%' itself, as
// %XX: the result is printable ASCII without white space, and decodes back
// to s alone.
func percentEncode(s string) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c > ' ' && c <= '~' && c != '%' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	return b.String()
}

// OutboxRecord is an outbox row with its whole state, as GetOutbox and
// ListOutbox return it.
type OutboxRecord struct {
	OutboxEntry
	Status     OutboxStatus
	DueAt      time.Time // when it is next due (Pending)
	ClaimedBy  string    // the worker holding or last holding a claim
	ClaimedAt  time.Time // when that claim was made; zero if never claimed
	LeaseUntil time.Time // Dispatching: when the claim's lease ends (ExtendClaims moves it); else zero
	LastCode   string    // the code of the last settlement, reconciliation or retry
	RemoteRef  string    // the remote's reference, if it gave one
	UpdatedAt  time.Time
	FinishedAt time.Time // when it became Completed or Failed; else zero
}

// Claim is one outbox row a worker holds: its entry, as the sender gets it,
// and the fence a settlement must present (the row id, the worker and the
// attempt number). A settlement with a claim that is no longer held is
// ErrClaimLost.
type Claim struct {
	OutboxEntry
	Worker    string
	ClaimedAt time.Time
	// LeaseUntil is when the claim's lease ended when it was made. Until
	// then no release takes the row from the worker; after, a release may,
	// and a settlement is then ErrClaimLost. ExtendClaims moves it.
	LeaseUntil time.Time
}

// OutboxFilter selects rows for ListOutbox. Zero fields do not filter, except
// Limit, which must be positive.
type OutboxFilter struct {
	Status  OutboxStatus // 0: any status
	Account AccountID    // "": any account
	Limit   int          // at most this many rows, oldest first; 1–10000
	// After pages: only rows enqueued after this one (the last row of the
	// page before). Zero: from the oldest. A row that no longer exists
	// (pruned), or with Account set a row of another account, is
	// ErrNotFound.
	After OutboxID
}
