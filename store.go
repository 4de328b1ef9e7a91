package turnframe

import (
	"context"
	"time"
)

// Write is one step of one turn, applied entirely or not at all by
// Store.Apply: the only way a turn changes.
//
// The parts are applied in this order inside one transaction: Begin, Admit,
// Settle, Expect, Events, Outbox, Phase or Advance, Replay. Events and
// Outbox rows belong to the one Settlement of the Write that moves an entry
// to JournalCommitted; a Write that carries events or outbox rows without
// exactly one such settlement is ErrInvalid.
type Write struct {
	Account AccountID
	Turn    TurnID
	// Begin creates the turn in PhaseReceived. The turn must not exist:
	// ErrConflict if it does. Its Account and ID must match the Write's.
	Begin *StoredTurn
	// Phase is the turn's new phase; PhaseUnset leaves it unchanged. The
	// move must be allowed by NextPhase, or the Write is ErrConflict.
	Phase TurnPhase
	// Advance is a phase the turn moves to after everything else of the
	// Write, if NextPhase allows the move then; a move it refuses is
	// skipped and the rest of the Write still lands (Applied.Phase says
	// where the turn is). A settlement carries its turn's move to
	// PhaseCommitted this way, so that the settlement lands even when the
	// turn was abandoned, or another entry went back to pending, meanwhile.
	// Setting both Phase and Advance is ErrInvalid.
	Advance TurnPhase
	// Replay, when not nil, replaces the turn's replay record.
	Replay *ReplayRecord
	// Admit admits commands Pending, in order; a terminal turn admits none
	// (ErrConflict, CheckAdmit). A key the account already used for the
	// same command is not admitted again: Applied.Admitted holds the
	// existing entry, whatever its turn and status — except an entry that
	// never settled in a turn that was abandoned, which this turn adopts
	// (see Readmit). The same key with a different command is ErrConflict.
	Admit []Command
	// Settle moves journal entries of this turn, each by NextEntry.
	Settle []Settlement
	// Events are appended to their cases: each gets the case's revision + 1.
	Events []Event
	// Expect is an optimistic check: a case whose revision is not the one
	// given is ErrConflict. 0 expects a case with no event.
	Expect map[CaseKey]CaseRevision
	// Outbox rows are enqueued Pending, carrying the account, the turn and
	// a key derived from the committing command's key by OutboxKey. No two
	// rows of one account share a key: a row whose key exists is
	// ErrConflict.
	Outbox []OutboxMessage
	// Now stamps every row the Write creates or changes. Zero is ErrInvalid.
	Now time.Time
}

// Settlement moves one journal entry of the Write's turn to a new status,
// by the rules of NextEntry.
type Settlement struct {
	Key IdempotencyKey
	To  JournalStatus
	// Attempt says who moves the entry. To Executing: the attempt that takes
	// it (a new one), or the attempt that holds it renewing its lease.
	// From Executing to Committed, Rejected or OutcomeUnknown: the attempt
	// that ran, which must still hold the entry (a fence). Zero: a
	// reconciliation, the only mover of an OutcomeUnknown entry.
	Attempt AttemptID
	// Prior is, when a new attempt takes the entry (To Executing), the
	// attempt the caller saw on it: zero for an entry never run. The take
	// is a compare-and-set: an entry that moved since is ErrConflict.
	Prior AttemptID
	// Lease is, To Executing, how long the attempt holds the entry from the
	// Write's Now; another attempt may take it over only once it ended.
	Lease     time.Duration
	Code      string // Rejected: the reason code
	RemoteRef string // OutcomeUnknown: the remote's reference, if any
}

// Applied is what one Store.Apply wrote.
type Applied struct {
	Phase    TurnPhase      // the turn's phase after the Write
	Admitted []JournalEntry // one per Write.Admit, in order: new or existing
	Settled  []JournalEntry // one per Write.Settle, in order, as now stored
	Events   []StoredEvent  // one per Write.Events, in order
	Outbox   []OutboxEntry  // one per Write.Outbox, in order
}

// TurnStore reads turns.
type TurnStore interface {
	// TurnPhase returns the turn's phase marker. ErrNotFound if the turn does
	// not exist for account.
	TurnPhase(ctx context.Context, account AccountID, turn TurnID) (TurnPhaseMarker, error)
	// LoadTurn returns the stored turn. ErrNotFound if the turn does not
	// exist for account.
	LoadTurn(ctx context.Context, account AccountID, turn TurnID) (StoredTurn, error)
	// ListUnfinishedTurns returns, oldest first (by turn id), at most limit
	// turns in scope for which Unfinished holds: non-terminal turns, turns
	// holding an OutcomeUnknown entry (a delivered turn can still have an
	// unsettled effect), and delivered turns holding a pending entry (a
	// resend after delivery). scope.After pages through them.
	ListUnfinishedTurns(ctx context.Context, scope RecoveryScope, limit int) ([]TurnPhaseMarker, error)
}

// CommandJournal reads journal entries.
type CommandJournal interface {
	// ForTurn returns the entries the turn admitted, in admission order;
	// none (and no error) for a turn with none or of another account.
	ForTurn(ctx context.Context, account AccountID, turn TurnID) ([]JournalEntry, error)
	// ByKey returns the entry admitted under key. ErrNotFound if account
	// never used it.
	ByKey(ctx context.Context, account AccountID, key IdempotencyKey) (JournalEntry, error)
}

// EventJournal reads events.
type EventJournal interface {
	// EventsByID returns the events with these ids, in append order. Ids
	// that do not exist for account are simply absent.
	EventsByID(ctx context.Context, account AccountID, ids []EventID) ([]StoredEvent, error)
	// EventsSince returns at most limit events of the case with a revision
	// above since, in revision order.
	EventsSince(ctx context.Context, account AccountID, c CaseKey, since CaseRevision, limit int) ([]StoredEvent, error)
	// CaseRevision returns the case's revision: 0 for a case with no event.
	CaseRevision(ctx context.Context, account AccountID, c CaseKey) (CaseRevision, error)
}

// ReplayStore reads replay records.
type ReplayStore interface {
	// Replay returns the turn's replay record. ErrNotFound if the turn has
	// none or does not exist for account.
	Replay(ctx context.Context, account AccountID, turn TurnID) (ReplayRecord, error)
}

// OutboxStore claims, settles and administers outbox rows. Every settlement
// presents a Claim and is refused with ErrClaimLost, changing nothing, unless
// the row is still Dispatching under that worker and attempt number.
type OutboxStore interface {
	// ClaimDue moves at most limit rows due at now to Dispatching under
	// worker (ClaimRow: attempts + 1, claimed at now, leased until now +
	// lease) and returns them, in claim order: due time, then enqueue
	// order. A row is due when it is Pending, its due time is not after
	// now, and no earlier row of its account and non-empty order key is
	// Pending, Dispatching or OutcomeUnknown. Two callers never claim the
	// same row.
	ClaimDue(ctx context.Context, now time.Time, limit int, worker string, lease time.Duration) ([]Claim, error)
	// ExtendClaims moves the lease of each claimed row to now + lease
	// (ExtendRow), for a worker whose sends are still running. results[i]
	// is the outcome for claims[i] alone: nil, or ErrClaimLost when the row
	// is no longer Dispatching under that claim (nothing changes then). err
	// is for the call as a whole; when it is not nil nothing was written.
	ExtendClaims(ctx context.Context, claims []Claim, now time.Time, lease time.Duration) (results []error, err error)
	// Complete settles a claimed row Completed with the remote's reference.
	Complete(ctx context.Context, claim Claim, remoteRef string, now time.Time) error
	// Retry settles a claimed row back to Pending, due at at, keeping code.
	Retry(ctx context.Context, claim Claim, code string, at time.Time) error
	// Fail settles a claimed row Failed with code.
	Fail(ctx context.Context, claim Claim, code string, now time.Time) error
	// MarkUnknown settles a claimed row OutcomeUnknown: it is never claimed
	// again until Resolve moves it.
	MarkUnknown(ctx context.Context, claim Claim, remoteRef string, now time.Time) error
	// Settle applies several settlements in one transaction (group commit).
	// results[i] is the outcome of settlements[i] alone (nil, or an error
	// wrapping ErrClaimLost or ErrInvalid): one refused settlement does not
	// refuse the others. err is for the transaction as a whole; when it is
	// not nil nothing was written and results is nil.
	Settle(ctx context.Context, settlements []OutboxSettlement) (results []error, err error)
	// Resolve settles an OutcomeUnknown row by verdict: Completed, Failed
	// (with code) or Pending due at now (resend). ErrConflict for a row in
	// any other status; ErrInvalid for VerdictUnresolved; ErrNotFound for
	// no such row.
	Resolve(ctx context.Context, id OutboxID, v Verdict, code string, now time.Time) error
	// Requeue moves a Failed row back to Pending, due at at, for an
	// operator. ErrConflict for a row in any other status.
	Requeue(ctx context.Context, id OutboxID, at time.Time) error
	// ReleaseExpiredClaims moves every Dispatching row whose lease ended at
	// now (LeaseEnded) back to Pending (ReleaseRow: attempts and due time
	// kept, so it is due again at once, in its place) and returns their ids
	// in enqueue order. A row whose lease is
	// still running is never released.
	ReleaseExpiredClaims(ctx context.Context, now time.Time) ([]OutboxID, error)
	// ReleaseClaim moves one Dispatching row back to Pending at now,
	// whether or not its lease ended: for an operator who knows its worker
	// is gone. If that worker is in fact still sending, the row may be sent
	// twice. ErrNotFound for no such row; ErrConflict for a row that is not
	// Dispatching.
	ReleaseClaim(ctx context.Context, id OutboxID, now time.Time) error
	// GetOutbox returns one row. ErrNotFound if it does not exist.
	GetOutbox(ctx context.Context, id OutboxID) (OutboxRecord, error)
	// ListOutbox returns rows matching filter, oldest first.
	ListOutbox(ctx context.Context, filter OutboxFilter) ([]OutboxRecord, error)
	// Prune deletes Completed and Failed rows finished before
	// finishedBefore and returns how many. It never deletes a journal key.
	Prune(ctx context.Context, finishedBefore time.Time) (int, error)
}

// Store is everything a turn, a dispatcher and recovery need, behind one
// transactional Apply. Implementations: sqlitestore (a SQLite file) and
// memstore (memory, for tests); storetest proves both obey the same rules.
// Every method is safe for concurrent use. After Close every method returns
// ErrClosed.
type Store interface {
	TurnStore
	CommandJournal
	EventJournal
	ReplayStore
	OutboxStore
	// Apply validates w (ErrInvalid, before any transaction starts) and
	// writes it in one transaction, or writes nothing and returns the
	// error: ErrNotFound for a turn that does not exist for the account,
	// ErrConflict for a refused transition, a moved revision or a key
	// reused for a different command.
	Apply(ctx context.Context, w Write) (Applied, error)
	// Close releases the store. Calls after Close return ErrClosed.
	Close() error
}
