// Package turnframe makes the external side effects of a conversational turn
// happen once, from one SQLite file and no database server.
//
// # Guarantees
//
//   - I14, resume by key. Every command is admitted under an idempotency key
//     before it runs. A turn run again after a crash recognises, by key, what
//     already ran, and never runs a settled command twice.
//   - I15, unknown is never retried blindly. A call that left and got no
//     answer, a timeout included, is outcome unknown. It is resolved by what
//     the remote can do (see Remote): looked up where it can be asked, sent
//     again under the same key only where it deduplicates, and otherwise
//     handed to a person (NeedsIntervention). Every move is in the audit
//     trail (HistoryRecord).
//   - Outbox atomicity. A command's events, its journal settlement, its outbox
//     rows and the turn's phase are one transaction (one Write), so an outbox
//     row exists if and only if the domain change that caused it committed.
//   - Work is exclusive: an outbox row is claimed by one dispatcher at a
//     time and a command runs in one place at a time, each under a lease
//     recorded on its row; a settlement needs the claim or the attempt.
//
// The design, with the reasons behind each rule, is DESIGN.md in the
// repository; the package docs cite its sections by name.
//
// The application drives all work, from its own loop or through the Run
// methods, which block until their context ends: nothing in this module
// starts a goroutine that outlives the call that started it, except a Handler
// or Sender that ignores its context past its deadline (see Handler).
//
// # For applications
//
// An application needs a handful of names; the rest of this package is for
// the stores and their tests.
//
//   - New returns a Runtime: Receive, Plan (PlanReport says what an earlier
//     turn already admitted), Execute with a Handler (a Mux, one handler per
//     command name; Commit, Reject, Unknown; Outcome.With for the app's own
//     rows in the commit), Deliver, Approve and Deny.
//   - NewDispatcher with a Sender (HTTPSender) and a DispatchConfig: Run, or
//     RunOnce from a loop the application owns.
//   - NewRecovery: Recover at start-up, or Run; Settle for what needs a
//     person.
//   - Options: WithClock, WithDestination and WithCommand (a Remote per
//     destination and command name), WithLogger, WithObserver.
//
// # For store authors
//
// A Store implements the interfaces of store.go. What only a store calls
// lives in package storekit, out of the application's way: the transition
// rules of the journal and the outbox (storekit.NextEntry, storekit.Readmit,
// storekit.ClaimRow, storekit.SettleRow, storekit.ResolveRow, …), the
// audit trail's constructors (storekit.EntryHistory, storekit.RowHistory,
// storekit.PhaseHistory) and the inbox's rule (storekit.CheckRedelivery).
// The rules this package also applies itself stay here: NextPhase,
// Unfinished, Stranded, LeaseEnded, OutboxKey, SameCommand, and the Check
// functions and Validate methods every input passes. storetest.Run proves
// that a store obeys them all.
//
// # Layout
//
// This package holds the domain: identifiers, phases and statuses, the value
// types, the store interfaces with their state machines (as pure functions
// both stores call), and the runtime, dispatcher and recovery built on them.
// sqlitestore implements Store over a SQLite file; memstore implements it in
// memory for application tests; storetest is the suite both pass.
package turnframe

import "time"

// AccountID is the tenant that owns a turn and everything it causes: 1 to 128
// bytes of UTF-8 without a NUL byte. Every read is scoped by it; another account's rows read as
// ErrNotFound.
type AccountID string

// CaseKey names the entity a command changes and its events belong to, such
// as "booking/42": 1 to 200 bytes of UTF-8 without a NUL byte, unique within an account.
type CaseKey string

// IdempotencyKey identifies a command across retries, turns and crashes:
// 1 to 255 bytes of UTF-8 with no control character, no white space at
// either end and no OutboxKeySeparator ('~'); unique per account, and never
// forgotten. See IdempotencyKey.Validate.
type IdempotencyKey string

// CaseRevision counts the events of one case: 0 means no event yet, and each
// appended event increments it by one.
type CaseRevision uint64

// Command is one thing the application asked the domain to do, admitted under
// Key before it runs. Two commands are the same command when Name, Case,
// Payload and NeedsApproval are equal.
type Command struct {
	Key     IdempotencyKey // 1–255 bytes; unique per account, forever
	Case    CaseKey        // the entity it changes
	Name    string         // what it does, e.g. "book"; 1–200 bytes
	Payload []byte         // the application's arguments, opaque here
	// NeedsApproval admits the command JournalAwaitingApproval instead of
	// Pending: it runs only once Runtime.Approve moved it on (a person
	// confirms a payment an agent proposed), and never if Runtime.Deny
	// rejects it. The zero value, false, admits it Pending. Stored with the
	// entry and read back as given.
	NeedsApproval bool
}

// JournalEntry is a command as the journal holds it: admitted, running or
// settled.
type JournalEntry struct {
	Account AccountID
	Turn    TurnID // the turn that admitted it
	Command
	Status   JournalStatus
	Attempt  AttemptID // the current or last attempt; zero while never run
	Attempts int       // how many attempts were started
	// LeaseUntil is, while the entry is Executing, when its attempt's hold
	// on it ends: until then no other attempt may take the entry over, so
	// a command runs in at most one place at a time. Zero in every other
	// status.
	LeaseUntil time.Time
	EventIDs   []EventID // Committed: the events it appended, in order
	Code       string    // Rejected: the reason code; a reconciliation's (and the policy's) reason, if it gave one
	RemoteRef  string    // OutcomeUnknown: the remote's reference, if it gave one
	AdmittedAt time.Time
	UpdatedAt  time.Time
}

// Event is a domain event a command appends to its case.
type Event struct {
	Case CaseKey // must be the committing command's case
	Type string  // 1–200 bytes, e.g. "booking.confirmed"
	Data []byte
}

// StoredEvent is an event as the journal holds it.
type StoredEvent struct {
	ID       EventID
	Account  AccountID
	Turn     TurnID
	Key      IdempotencyKey // the command that appended it
	Revision CaseRevision   // the case's revision this event made
	Event
	At time.Time
}

// StoredTurn is a turn as the store holds it.
type StoredTurn struct {
	Account      AccountID
	ID           TurnID
	Conversation ConversationID
	Text         string // the user's message; may be empty (a voice turn)
	// MessageID is the channel's id of the message that began the turn
	// (ReceiveMessage); "" for a turn received without one. No two turns
	// of an account share one.
	MessageID MessageID
	Phase     TurnPhase
	// ReceivedAt is when the turn began: as a Write's Begin gave it, or
	// that Write's Now when it gave none (the zero time). No later Write
	// moves it.
	ReceivedAt time.Time
	UpdatedAt  time.Time
}

// TurnPhaseMarker is the phase a turn is in and when it last changed: what
// recovery reads first.
type TurnPhaseMarker struct {
	Account      AccountID
	Turn         TurnID
	Conversation ConversationID
	Phase        TurnPhase
	UpdatedAt    time.Time
}

// RecoveryScope narrows a listing of unfinished turns.
type RecoveryScope struct {
	// Account, when not empty, limits the listing to one tenant.
	Account AccountID
	// UpdatedBefore, when not zero, leaves out turns updated at or after it,
	// so a sweep in a running process leaves turns in flight alone.
	UpdatedBefore time.Time
	// After, when not zero, is a cursor: only turns whose id sorts after it
	// are listed. Pass the last turn of one page to get the next.
	After TurnID
}
