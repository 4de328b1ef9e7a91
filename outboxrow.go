package turnframe

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"
)

// OutboxMessage is an effect a committing command asks to send. Store.Apply
// enqueues it Pending in the same transaction as the command's events.
type OutboxMessage struct {
	Destination string    // where the sender sends it, e.g. "payments"; 1–200 bytes
	Payload     []byte    // the body, opaque here
	OrderKey    string    // optional: strict enqueue order among this account's rows of this key
	NotBefore   time.Time // optional: not due before this time
}

// OutboxEntry is what a Sender is handed: one row and the key it must
// forward to the remote.
type OutboxEntry struct {
	ID      OutboxID
	Account AccountID
	Turn    TurnID
	// Key is the idempotency key of the command that enqueued the row, or
	// "key/1", "key/2", … when one command enqueued several, so a resumed
	// command produces the same keys. Per account: see RemoteKey.
	Key         IdempotencyKey
	Destination string
	Payload     []byte
	OrderKey    string
	Attempts    int // attempts started, this one included once claimed
	CreatedAt   time.Time
}

// RemoteKey returns the row's key qualified by its account, for a remote that
// several tenants share: two accounts may both use the key "k1", and a shared
// remote must not take the second for a replay of the first. It is
// deterministic (every resend carries the same value) and at most 255 bytes:
// "LEN.ACCOUNT.KEY" when that fits, else its SHA-256 in hex (64 bytes).
// A sender whose remote is per tenant may forward Key instead.
func (e OutboxEntry) RemoteKey() string {
	plain := strconv.Itoa(len(e.Account)) + "." + string(e.Account) + "." + string(e.Key)
	if len(plain) <= 255 {
		return plain
	}
	sum := sha256.Sum256([]byte(plain))
	return hex.EncodeToString(sum[:])
}

// OutboxRecord is an outbox row with its whole state, as GetOutbox and
// ListOutbox return it.
type OutboxRecord struct {
	OutboxEntry
	Status     OutboxStatus
	DueAt      time.Time // when it is next due (Pending)
	ClaimedBy  string    // the worker holding or last holding a claim
	ClaimedAt  time.Time // when that claim was made; zero if never claimed
	LastCode   string    // the last retry, failure or reconciliation code
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
}

// OutboxFilter selects rows for ListOutbox. Zero fields do not filter, except
// Limit, which must be positive.
type OutboxFilter struct {
	Status  OutboxStatus // 0: any status
	Account AccountID    // "": any account
	Limit   int          // at most this many rows, oldest first; 1–10000
}
