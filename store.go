package turnframe

import (
	"context"
	"time"
)

// Write is one step of one turn, applied entirely or not at all by
// Store.Apply: the only way a turn changes.
//
// The parts are applied in this order inside one transaction: Begin,
// ExpectPhase, Admit, Settle, Expect, Events, Outbox, Phase or Advance,
// Replay, and last App. Events and
// Outbox rows belong to the one Settlement of the Write that moves an entry
// to JournalCommitted; a Write that carries events or outbox rows without
// exactly one such settlement is ErrInvalid.
type Write struct {
	Account AccountID
	Turn    TurnID
	// Begin creates the turn in PhaseReceived. The turn must not exist:
	// ErrConflict if it does. Its Account and ID must match the Write's.
	//
	// A Begin whose MessageID the account already began a turn with is a
	// redelivery, judged by storekit.CheckRedelivery: the same message (same
	// conversation and text) writes nothing of the Write, calls no App,
	// and Applied.Redelivered is the turn that message began; another
	// message under that id is ErrConflict. Two Writes racing with one
	// message id begin one turn: the other is the redelivery.
	Begin *StoredTurn
	// Phase is the turn's new phase; PhaseUnset leaves it unchanged. The
	// move must be allowed by NextPhase, or the Write is ErrConflict.
	Phase TurnPhase
	// Advance is a phase the turn moves to after everything else of the
	// Write, if NextPhase allows the move then; a move it refuses is
	// skipped and the rest of the Write still lands (Applied.Phase says
	// where the turn is), except that a turn before PhaseExecuting that
	// pending entries keep from a later phase still moves to
	// PhaseExecuting (storekit.AdvancePhase). A settlement carries its
	// turn's move to PhaseCommitted this way, so that the settlement lands
	// even when the turn was abandoned, or another entry went back to
	// pending, meanwhile.
	// Setting both Phase and Advance is ErrInvalid.
	Advance TurnPhase
	// ExpectPhase is an optimistic check on the turn: a turn whose phase,
	// as stored before this Write, is not ExpectPhase is ErrConflict
	// (storekit.CheckExpectedPhase) and nothing is written. PhaseUnset
	// checks nothing; with Begin it is ErrInvalid. Deliver and Abandon
	// write the replay record they read under the phase they read it in,
	// so a Plan landing in between is refused, not overwritten.
	ExpectPhase TurnPhase
	// Replay, when not nil, replaces the turn's replay record.
	Replay *ReplayRecord
	// Admit admits commands Pending (AwaitingApproval for a command that
	// NeedsApproval: storekit.NewEntry), in order; a terminal turn admits none
	// (ErrConflict, storekit.CheckAdmit). A key the account already used for the
	// same command is not admitted again: Applied.Admitted holds the
	// existing entry, whatever its turn and status — except an entry that
	// never settled in a turn that was abandoned, which this turn adopts
	// (see storekit.Readmit). The same key with a different command is ErrConflict.
	Admit []Command
	// RepeatOnly makes Admit a repeat of admissions made before: a command
	// whose key is new, or whose entry this Write would adopt from an
	// abandoned turn, is ErrConflict (storekit.CheckRepeat) and nothing is
	// written. Runtime.Plan sets it for a turn planned already: a turn is
	// interpreted once.
	RepeatOnly bool
	// Settle moves journal entries of this turn, each by storekit.NextEntry.
	Settle []Settlement
	// Events are appended to their cases: each gets the case's revision + 1.
	Events []Event
	// Expect is an optimistic check: a case whose revision is not the one
	// given is ErrConflict. 0 expects a case with no event. At most
	// MaxExpectedCases cases (pgstore takes a lock per case).
	Expect map[CaseKey]CaseRevision
	// Outbox rows are enqueued Pending, carrying the account, the turn and
	// a key derived from the committing command's key by OutboxKey. No two
	// rows of one account share a key: a row whose key exists is
	// ErrConflict.
	Outbox []OutboxMessage
	// Now stamps every row the Write creates or changes. Zero is ErrInvalid.
	Now time.Time
	// Actor is who makes the Write, as the audit trail records every move
	// it makes (storekit.EntryHistory, storekit.PhaseHistory, storekit.RowHistory); "" is ActorApp.
	// Only an actor that MayIntervene settles an entry that needs
	// intervention.
	Actor Actor
	// Note says why, for the audit trail: at most MaxNoteLen bytes.
	Note string
	// App, when not nil, is the application's own writes: Apply calls it
	// once, with the store's transaction (Tx), after everything above
	// was checked and staged and before the commit, so the app's rows
	// commit with the Write or not at all. A Write the store refuses
	// never calls it. When it returns an error nothing of the Write is
	// written, and Apply returns an error wrapping ErrAppWrite and that
	// error. A crash before the commit leaves none of it.
	App AppWrites
}

// Settlement moves one journal entry of the Write's turn to a new status,
// by the rules of storekit.NextEntry.
type Settlement struct {
	Key IdempotencyKey
	To  JournalStatus
	// Attempt says who moves the entry. To Executing: the attempt that takes
	// it (a new one), or the attempt that holds it renewing its lease.
	// From Executing to Committed, Rejected or OutcomeUnknown: the attempt
	// that ran, which must still hold the entry (a fence). From Pending to
	// one of those three: a local attempt (WithLocalCommand), a new id,
	// which ran without taking the entry. Zero: a reconciliation, the only
	// mover of an OutcomeUnknown entry.
	Attempt AttemptID
	// Prior is, when a new attempt takes the entry (To Executing) or a
	// local attempt settles it from Pending, the attempt the caller saw on
	// it: zero for an entry never run. Either is a compare-and-set: an
	// entry that moved since is ErrConflict. For a
	// reconciliation of an uncertain entry, a Prior that is not zero
	// fences it the same way: the entry must still be under that attempt,
	// the one whose outcome the caller looked into.
	Prior AttemptID
	// Lease is, To Executing, how long the attempt holds the entry from the
	// Write's Now; another attempt may take it over only once it ended.
	Lease     time.Duration
	Code      string // Rejected: the reason code
	RemoteRef string // OutcomeUnknown: the remote's reference, if any
	// From, when not the zero JournalStatus, fences the settlement on the
	// entry's status: it must still be in From, the status the caller
	// read, else ErrConflict and nothing of the Write is written. With it
	// the caller knows which move it made (Recovery.Settle counts a dead
	// attempt settled straight from Executing as an unknown outcome). A
	// take (To Executing) fenced on Pending is never a take-over: the store
	// refuses it for an entry any attempt holds, its lease running or
	// ended. The runtime fences so every take of a command whose Remote
	// forbids a blind rerun, because a store judges a lease's end on its
	// own clock, not the caller's (DESIGN.md §7, "Runtime").
	From JournalStatus
}

// Applied is what one Store.Apply wrote.
type Applied struct {
	Phase    TurnPhase      // the turn's phase after the Write
	Admitted []JournalEntry // one per Write.Admit, in order: new or existing
	Settled  []JournalEntry // one per Write.Settle, in order, as now stored
	Events   []StoredEvent  // one per Write.Events, in order
	Outbox   []OutboxEntry  // one per Write.Outbox, in order
	// Earlier holds, one per Write.Admit and in order, the entry the
	// command's key had admitted before this Write, as it stood before it
	// (its turn, its status) — for an adopted entry, the abandoned turn it
	// came from; the zero JournalEntry for a key this Write admitted first.
	Earlier []JournalEntry
	// Redelivered, when not nil, is the turn an earlier delivery of
	// Write.Begin's message began, as stored now: the Write wrote nothing.
	Redelivered *StoredTurn
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
	// holding an OutcomeUnknown or NeedsIntervention entry (a delivered
	// turn can still have an unsettled effect), delivered turns holding a
	// pending entry (a resend after delivery) or an AwaitingApproval one,
	// and abandoned turns holding an Executing one. scope.After pages
	// through them. A limit CheckLimit refuses (not 1 to MaxLimit) is
	// ErrInvalid.
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
	// worker (storekit.ClaimRow: attempts + 1, claimed at now, leased until now +
	// lease) and returns them, in claim order: due time, then enqueue
	// order. A row is due when it is Pending, its due time is not after
	// now, and no earlier row of its account and non-empty order key is
	// Pending, Dispatching, OutcomeUnknown or NeedsIntervention
	// (OutboxStatus.HoldsOrder). Two callers never claim the
	// same row.
	ClaimDue(ctx context.Context, now time.Time, limit int, worker string, lease time.Duration) ([]Claim, error)
	// ExtendClaims moves the lease of each claimed row to now + lease
	// (storekit.ExtendRow), for a worker whose sends are still running. results[i]
	// is the outcome for claims[i] alone: nil, or ErrClaimLost when the row
	// is no longer Dispatching under that claim (nothing changes then). err
	// is for the call as a whole; when it is not nil nothing was written.
	ExtendClaims(ctx context.Context, claims []Claim, now time.Time, lease time.Duration) (results []error, err error)
	// Settle applies several settlements in one transaction (group commit).
	// results[i] is the outcome of settlements[i] alone (nil, or an error
	// wrapping ErrClaimLost or ErrInvalid): one refused settlement does not
	// refuse the others. Each that lands is recorded in the audit trail as
	// made by its SettledBy, with its Note. err is for the transaction as a
	// whole; when it is not nil nothing was written and results is nil.
	Settle(ctx context.Context, settlements []OutboxSettlement) (results []error, err error)
	// Resolve settles an OutcomeUnknown or NeedsIntervention row by
	// storekit.ResolveRow. ErrInvalid for bad input (Resolution.Validate);
	// ErrNotFound for no such row; ErrConflict for a row in another status,
	// or one that needs intervention and an actor that may not intervene.
	Resolve(ctx context.Context, res Resolution) error
	// Requeue moves a Failed row back to Pending, due at at, for an
	// operator (storekit.RequeueRow). attempts, when not zero, fences it:
	// the row's Attempts when the operator looked, so a row requeued, sent
	// and failed again since that look is not sent once more on it; the
	// fence is checked in the transaction that moves the row. A caller that
	// hands on the attempts it read must have read the row Failed: a row
	// never sent has 0 attempts, which is no fence. ErrInvalid for a
	// negative attempts; ErrConflict, changing nothing, for a row in any
	// other status or at other attempts.
	Requeue(ctx context.Context, id OutboxID, attempts int, at time.Time) error
	// ExpireClaims moves every Dispatching row whose lease ended at now
	// (LeaseEnded) to OutcomeUnknown by storekit.ExpireRow, recorded as
	// ActorRecovery, and returns their ids in enqueue order. A row whose
	// lease is still running is never touched. A store whose writers run
	// at once may leave a row another transaction holds locked for a later
	// call, rather than wait for it (pgstore). The send of an expired row
	// may have started, so it is not sent again blindly: the policy of its
	// destination's Remote, or the app or an operator, resolves it.
	ExpireClaims(ctx context.Context, now time.Time) ([]OutboxID, error)
	// ReleaseClaim moves one Dispatching row back to Pending at now,
	// whether or not its lease ended: for an operator who knows its worker
	// is gone. If that worker is in fact still sending, the row may be sent
	// twice. attempts, when not zero, fences it: the row's Attempts when
	// the operator looked, which names the claim, so a claim taken since
	// that look (the one looked at ended and the row was claimed again) is
	// not released on it; the fence is checked in the transaction that
	// moves the row (storekit.ReleaseRow). As with Requeue, hand on the
	// attempts of a row read Dispatching only: 0 is no fence. ErrInvalid
	// for a negative attempts; ErrNotFound for no such row; ErrConflict,
	// changing nothing, for a row that is not Dispatching or at other
	// attempts. Recorded as ActorOperator, as Requeue is.
	ReleaseClaim(ctx context.Context, id OutboxID, attempts int, now time.Time) error
	// GetOutbox returns one row. ErrNotFound if it does not exist.
	GetOutbox(ctx context.Context, id OutboxID) (OutboxRecord, error)
	// ListOutbox returns rows matching filter, oldest first.
	ListOutbox(ctx context.Context, filter OutboxFilter) ([]OutboxRecord, error)
	// Prune deletes Completed and Failed rows finished before
	// finishedBefore, with their history, and returns how many. It never
	// deletes a journal key or its history. A store may delete in batches,
	// oldest first, of at most storekit.PruneBatch rows, each with its
	// history in a transaction of its own: an error or a crash between
	// batches leaves the rows of the batches before it pruned and every
	// other row whole, with its history; with an error, the count is of
	// the rows pruned before it.
	Prune(ctx context.Context, finishedBefore time.Time) (int, error)
}

// HistoryStore reads and extends the audit trail. Every move of a journal
// entry (storekit.EntryMoved), of an outbox row's status and of a turn's phase
// appends a HistoryRecord in the transaction that makes it: a created
// entry, row or turn (From ""), a take, a settlement, a claim, a retry, an
// expiry, a resolution, a requeue, a release. Lease renewals and
// extensions move nothing and are not recorded.
type HistoryStore interface {
	// History returns at most limit records of subject, oldest first (by
	// Seq), after the record numbered after (0: from the first). None, and
	// no error, for a subject without history or of another account.
	History(ctx context.Context, subject Subject, after int64, limit int) ([]HistoryRecord, error)
	// RecordEvidence appends rec as evidence that moves nothing: the store
	// sets From and To to the subject's status (or phase) as it is, and
	// Evidence. ErrInvalid for a bad record (HistoryRecord.Validate, From
	// and To aside); ErrNotFound for a subject that does not exist for its
	// account.
	RecordEvidence(ctx context.Context, rec HistoryRecord) error
}

// Store is everything a turn, a dispatcher and recovery need, behind one
// transactional Apply. Implementations: sqlitestore (a SQLite file) and
// memstore (memory, for tests); storetest proves both obey the same rules.
// Every method is safe for concurrent use. After Close every method returns
// ErrClosed, but for input it refuses as ErrInvalid before reaching the
// store.
type Store interface {
	TurnStore
	CommandJournal
	EventJournal
	ReplayStore
	OutboxStore
	HistoryStore
	// Apply validates w (ErrInvalid, before any transaction starts) and
	// writes it in one transaction, or writes nothing and returns the
	// error: ErrNotFound for a turn that does not exist for the account,
	// ErrConflict for a refused transition, a moved revision or a key
	// reused for a different command; ErrAppWrite, wrapping the app's
	// own error, when w.App returned one.
	Apply(ctx context.Context, w Write) (Applied, error)
	// Close releases the store. Calls after Close return ErrClosed (input
	// found invalid first is still ErrInvalid).
	Close() error
}
