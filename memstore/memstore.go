// Package memstore is a turnframe.Store in memory, for application tests.
//
// It obeys the same rules as sqlitestore, to the letter: both call the
// transition rules of the root package and both pass storetest.Run. It is
// safe for concurrent use; every value goes in and comes out as a copy, so a
// caller that mutates a slice it passed or got back changes nothing stored.
// Times are kept as the SQLite store keeps them: in UTC, truncated to the
// microsecond. Nothing survives the process.
package memstore

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/internal/wake"
)

var _ turnframe.Store = (*Store)(nil)

// Store is an in-memory turnframe.Store. The zero value is not usable; call
// New. All methods are safe for concurrent use: one mutex serialises them,
// which makes every Apply and every claim trivially atomic and exclusive.
type Store struct {
	ids *turnframe.IDGenerator

	mu     sync.Mutex
	closed bool
	seq    int64 // the last sequence number handed to an entry, event or outbox row

	turns   map[turnframe.TurnID]*turnRow
	inbox   map[messageKey]turnframe.TurnID // the turn each message id began, per account; kept with the turn
	entries map[entryKey]*entryRow          // every key an account ever used; never deleted
	byTurn  map[turnframe.TurnID][]entryKey
	events  []turnframe.StoredEvent // append order
	eventAt map[turnframe.EventID]int
	cases   map[caseKey][]int // indexes into events, in revision order
	outbox  map[turnframe.OutboxID]*outboxRow
	rowKeys map[rowKey]turnframe.OutboxID // the key of every outbox row held, per account

	// history is the audit trail, per subject (canonical: see canonical),
	// in Seq order; hseq is the last Seq handed out.
	history map[turnframe.Subject][]turnframe.HistoryRecord
	hseq    int64

	app map[string][]byte // the application's own data, committed by App functions (app.go)

	enqueued wake.Broadcast // signalled by each commit that enqueued rows (notify.go)
}

// messageKey is a channel's message id within its account.
type messageKey struct {
	account turnframe.AccountID
	id      turnframe.MessageID
}

type turnRow struct {
	turn   turnframe.StoredTurn
	replay *turnframe.ReplayRecord
}

type entryKey struct {
	account turnframe.AccountID
	key     turnframe.IdempotencyKey
}

type entryRow struct {
	entry turnframe.JournalEntry
	seq   int64 // admission order
}

type caseKey struct {
	account turnframe.AccountID
	c       turnframe.CaseKey
}

// rowKey is an outbox row's key within its account: unique among the rows
// the store holds.
type rowKey struct {
	account turnframe.AccountID
	key     turnframe.IdempotencyKey
}

type outboxRow struct {
	rec turnframe.OutboxRecord
	seq int64 // enqueue order
}

// Option configures New.
type Option func(*Store)

// WithIDGenerator makes the store draw event and outbox ids from g, for
// tests that need reproducible ids. The default is turnframe.NewIDGenerator().
func WithIDGenerator(g *turnframe.IDGenerator) Option {
	return func(s *Store) { s.ids = g }
}

// New returns an empty store.
func New(opts ...Option) *Store {
	s := &Store{
		turns:   make(map[turnframe.TurnID]*turnRow),
		inbox:   make(map[messageKey]turnframe.TurnID),
		entries: make(map[entryKey]*entryRow),
		byTurn:  make(map[turnframe.TurnID][]entryKey),
		eventAt: make(map[turnframe.EventID]int),
		cases:   make(map[caseKey][]int),
		outbox:  make(map[turnframe.OutboxID]*outboxRow),
		rowKeys: make(map[rowKey]turnframe.OutboxID),
		history: make(map[turnframe.Subject][]turnframe.HistoryRecord),
	}
	for _, opt := range opts {
		opt(s)
	}
	if s.ids == nil {
		s.ids = turnframe.NewIDGenerator()
	}
	return s
}

// Close empties the store. Every call after it, Close included, returns an
// error wrapping turnframe.ErrClosed, but for input it refuses as
// turnframe.ErrInvalid before reaching the store.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed
	}
	s.closed = true
	s.turns, s.entries, s.byTurn, s.events, s.eventAt, s.cases, s.outbox, s.rowKeys = nil, nil, nil, nil, nil, nil, nil, nil
	s.history, s.app = nil, nil
	s.enqueued.Signal() // a Run waiting for an enqueue claims once more, and finds the store closed
	return nil
}

var errClosed = fmt.Errorf("memstore: %w", turnframe.ErrClosed)

// lock takes the store's mutex, or returns the context's error or ErrClosed
// without holding it: like a SQL store, a cancelled call does nothing.
func (s *Store) lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: %w", err)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errClosed
	}
	return nil
}

// stamp is how the store keeps a time: UTC, truncated to the microsecond,
// as SQLite keeps it in an INTEGER of Unix microseconds.
func stamp(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.Truncate(time.Microsecond).UTC()
}

func (s *Store) findTurn(account turnframe.AccountID, turn turnframe.TurnID) (*turnRow, error) {
	t, ok := s.turns[turn]
	if !ok || t.turn.Account != account {
		return nil, fmt.Errorf("memstore: turn %v: %w", turn, turnframe.ErrNotFound)
	}
	return t, nil
}

// TurnPhase returns the turn's phase marker. ErrNotFound if the turn does not
// exist for account.
func (s *Store) TurnPhase(ctx context.Context, account turnframe.AccountID, turn turnframe.TurnID) (turnframe.TurnPhaseMarker, error) {
	if err := turnframe.CheckTurnRef(account, turn); err != nil {
		return turnframe.TurnPhaseMarker{}, err
	}
	if err := s.lock(ctx); err != nil {
		return turnframe.TurnPhaseMarker{}, err
	}
	defer s.mu.Unlock()
	t, err := s.findTurn(account, turn)
	if err != nil {
		return turnframe.TurnPhaseMarker{}, err
	}
	return marker(t.turn), nil
}

func marker(t turnframe.StoredTurn) turnframe.TurnPhaseMarker {
	return turnframe.TurnPhaseMarker{Account: t.Account, Turn: t.ID, Conversation: t.Conversation, Phase: t.Phase, UpdatedAt: t.UpdatedAt}
}

// LoadTurn returns the stored turn. ErrNotFound if the turn does not exist
// for account.
func (s *Store) LoadTurn(ctx context.Context, account turnframe.AccountID, turn turnframe.TurnID) (turnframe.StoredTurn, error) {
	if err := turnframe.CheckTurnRef(account, turn); err != nil {
		return turnframe.StoredTurn{}, err
	}
	if err := s.lock(ctx); err != nil {
		return turnframe.StoredTurn{}, err
	}
	defer s.mu.Unlock()
	t, err := s.findTurn(account, turn)
	if err != nil {
		return turnframe.StoredTurn{}, err
	}
	return t.turn, nil
}

// ListUnfinishedTurns returns, oldest first by turn id, at most limit turns in
// scope for which turnframe.Unfinished holds; with scope.After, only turns
// whose id sorts after it.
func (s *Store) ListUnfinishedTurns(ctx context.Context, scope turnframe.RecoveryScope, limit int) ([]turnframe.TurnPhaseMarker, error) {
	if err := scope.Validate(); err != nil {
		return nil, err
	}
	if err := turnframe.CheckLimit("limit", limit); err != nil {
		return nil, err
	}
	before := stamp(scope.UpdatedBefore)
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []turnframe.TurnPhaseMarker
	for id, t := range s.turns {
		if scope.Account != "" && t.turn.Account != scope.Account {
			continue
		}
		if !before.IsZero() && !t.turn.UpdatedAt.Before(before) {
			continue
		}
		if !scope.After.IsZero() && id.Compare(scope.After) <= 0 {
			continue
		}
		if !turnframe.Unfinished(t.turn.Phase, s.holds(id, turnframe.JournalOutcomeUnknown, turnframe.JournalNeedsIntervention),
			s.holds(id, turnframe.JournalPending, turnframe.JournalExecuting), s.holds(id, turnframe.JournalExecuting),
			s.holds(id, turnframe.JournalAwaitingApproval)) {
			continue
		}
		out = append(out, marker(t.turn))
	}
	slices.SortFunc(out, func(a, b turnframe.TurnPhaseMarker) int { return a.Turn.Compare(b.Turn) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// holds reports whether the turn has an entry in one of statuses.
func (s *Store) holds(turn turnframe.TurnID, statuses ...turnframe.JournalStatus) bool {
	for _, k := range s.byTurn[turn] {
		if slices.Contains(statuses, s.entries[k].entry.Status) {
			return true
		}
	}
	return false
}

// ForTurn returns the entries the turn admitted, in admission order; none for
// a turn with none or of another account.
func (s *Store) ForTurn(ctx context.Context, account turnframe.AccountID, turn turnframe.TurnID) ([]turnframe.JournalEntry, error) {
	if err := turnframe.CheckTurnRef(account, turn); err != nil {
		return nil, err
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []turnframe.JournalEntry
	for _, k := range s.byTurn[turn] {
		if k.account == account {
			out = append(out, copyEntry(s.entries[k].entry))
		}
	}
	return out, nil
}

// ByKey returns the entry admitted under key. ErrNotFound if account never
// used it.
func (s *Store) ByKey(ctx context.Context, account turnframe.AccountID, key turnframe.IdempotencyKey) (turnframe.JournalEntry, error) {
	if err := account.Validate(); err != nil {
		return turnframe.JournalEntry{}, err
	}
	if err := key.ValidateStored(); err != nil {
		return turnframe.JournalEntry{}, err
	}
	if err := s.lock(ctx); err != nil {
		return turnframe.JournalEntry{}, err
	}
	defer s.mu.Unlock()
	e, ok := s.entries[entryKey{account, key}]
	if !ok {
		return turnframe.JournalEntry{}, fmt.Errorf("memstore: key %q: %w", key, turnframe.ErrNotFound)
	}
	return copyEntry(e.entry), nil
}

// EventsByID returns the events with these ids, in append order. Ids that do
// not exist for account are absent.
func (s *Store) EventsByID(ctx context.Context, account turnframe.AccountID, ids []turnframe.EventID) ([]turnframe.StoredEvent, error) {
	if err := account.Validate(); err != nil {
		return nil, err
	}
	for i, id := range ids {
		if err := turnframe.CheckID(fmt.Sprintf("ids[%d]", i), id); err != nil {
			return nil, err
		}
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var at []int
	for _, id := range ids {
		i, ok := s.eventAt[id]
		if ok && s.events[i].Account == account && !slices.Contains(at, i) {
			at = append(at, i)
		}
	}
	slices.Sort(at)
	out := make([]turnframe.StoredEvent, 0, len(at))
	for _, i := range at {
		out = append(out, copyEvent(s.events[i]))
	}
	return out, nil
}

// EventsSince returns at most limit events of the case with a revision above
// since, in revision order.
func (s *Store) EventsSince(ctx context.Context, account turnframe.AccountID, c turnframe.CaseKey, since turnframe.CaseRevision, limit int) ([]turnframe.StoredEvent, error) {
	if err := account.Validate(); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if err := turnframe.CheckLimit("limit", limit); err != nil {
		return nil, err
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []turnframe.StoredEvent
	for _, i := range s.cases[caseKey{account, c}] {
		if s.events[i].Revision > since && len(out) < limit {
			out = append(out, copyEvent(s.events[i]))
		}
	}
	return out, nil
}

// CaseRevision returns the case's revision: 0 for a case with no event.
func (s *Store) CaseRevision(ctx context.Context, account turnframe.AccountID, c turnframe.CaseKey) (turnframe.CaseRevision, error) {
	if err := account.Validate(); err != nil {
		return 0, err
	}
	if err := c.Validate(); err != nil {
		return 0, err
	}
	if err := s.lock(ctx); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	return turnframe.CaseRevision(len(s.cases[caseKey{account, c}])), nil
}

// Replay returns the turn's replay record. ErrNotFound if the turn has none
// or does not exist for account.
func (s *Store) Replay(ctx context.Context, account turnframe.AccountID, turn turnframe.TurnID) (turnframe.ReplayRecord, error) {
	if err := turnframe.CheckTurnRef(account, turn); err != nil {
		return turnframe.ReplayRecord{}, err
	}
	if err := s.lock(ctx); err != nil {
		return turnframe.ReplayRecord{}, err
	}
	defer s.mu.Unlock()
	t, err := s.findTurn(account, turn)
	if err != nil {
		return turnframe.ReplayRecord{}, err
	}
	if t.replay == nil {
		return turnframe.ReplayRecord{}, fmt.Errorf("memstore: replay of turn %v: %w", turn, turnframe.ErrNotFound)
	}
	return copyReplay(*t.replay), nil
}

func copyEntry(e turnframe.JournalEntry) turnframe.JournalEntry {
	e.Payload = bytes.Clone(e.Payload)
	e.EventIDs = slices.Clone(e.EventIDs)
	return e
}

func copyEvent(e turnframe.StoredEvent) turnframe.StoredEvent {
	e.Data = bytes.Clone(e.Data)
	return e
}

func copyReplay(r turnframe.ReplayRecord) turnframe.ReplayRecord {
	if r.Understanding != nil {
		u := turnframe.Understanding{Questions: slices.Clone(r.Understanding.Questions)}
		r.Understanding = &u
	}
	r.LoadedCases = slices.Clone(r.LoadedCases)
	return r
}

func copyRecord(r turnframe.OutboxRecord) turnframe.OutboxRecord {
	r.Payload = bytes.Clone(r.Payload)
	return r
}
