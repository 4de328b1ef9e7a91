package faulttest_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/turnframe/turnframe"
)

// errInjected is the failure faultStore injects: no sentinel, like a disk
// or driver error.
var errInjected = errors.New("injected store failure")

// failMode says whether the Nth call fails before it reaches the store
// (nothing written) or after (written, but the caller hears a failure: a
// lost acknowledgement).
type failMode int

const (
	failBefore failMode = iota
	failAfter
)

func (m failMode) String() string { return [...]string{"before", "after"}[m] }

// faultStore wraps a Store and fails its Nth call (counting every method
// but Close from 1); 0 fails nothing and only counts.
type faultStore struct {
	inner turnframe.Store
	mode  failMode

	mu     sync.Mutex
	calls  int
	failAt int
	failed string // the call that failed, for messages

	armedCalls int // calls made while armed, set by disarm
}

var _ turnframe.Store = (*faultStore)(nil)

func (s *faultStore) arm(n int, mode failMode) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls, s.failAt, s.mode, s.failed = 0, n, mode, ""
}

// disarm stops failing calls and keeps how many calls were made while
// armed: the scenario's length.
func (s *faultStore) disarm() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armedCalls, s.failAt = s.calls, 0
}

// count returns how many calls were made between arm and disarm.
func (s *faultStore) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.armedCalls
}

// hit counts a call and reports whether it fails, and how.
func (s *faultStore) hit(op string) (before, after bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.failAt == 0 || s.calls != s.failAt {
		return false, false
	}
	s.failed = fmt.Sprintf("%s (call %d, %v)", op, s.calls, s.mode)
	return s.mode == failBefore, s.mode == failAfter
}

func injected(op string) error { return fmt.Errorf("faultstore: %s: %w", op, errInjected) }

// run is the body of every wrapped method.
func run[T any](s *faultStore, op string, do func() (T, error)) (T, error) {
	var zero T
	before, after := s.hit(op)
	if before {
		return zero, injected(op)
	}
	v, err := do()
	if after {
		return zero, injected(op)
	}
	return v, err
}

func run0(s *faultStore, op string, do func() error) error {
	_, err := run(s, op, func() (struct{}, error) { return struct{}{}, do() })
	return err
}

func (s *faultStore) Apply(ctx context.Context, w turnframe.Write) (turnframe.Applied, error) {
	return run(s, "Apply", func() (turnframe.Applied, error) { return s.inner.Apply(ctx, w) })
}
func (s *faultStore) TurnPhase(ctx context.Context, a turnframe.AccountID, t turnframe.TurnID) (turnframe.TurnPhaseMarker, error) {
	return run(s, "TurnPhase", func() (turnframe.TurnPhaseMarker, error) { return s.inner.TurnPhase(ctx, a, t) })
}
func (s *faultStore) LoadTurn(ctx context.Context, a turnframe.AccountID, t turnframe.TurnID) (turnframe.StoredTurn, error) {
	return run(s, "LoadTurn", func() (turnframe.StoredTurn, error) { return s.inner.LoadTurn(ctx, a, t) })
}
func (s *faultStore) ListUnfinishedTurns(ctx context.Context, sc turnframe.RecoveryScope, limit int) ([]turnframe.TurnPhaseMarker, error) {
	return run(s, "ListUnfinishedTurns", func() ([]turnframe.TurnPhaseMarker, error) { return s.inner.ListUnfinishedTurns(ctx, sc, limit) })
}
func (s *faultStore) ForTurn(ctx context.Context, a turnframe.AccountID, t turnframe.TurnID) ([]turnframe.JournalEntry, error) {
	return run(s, "ForTurn", func() ([]turnframe.JournalEntry, error) { return s.inner.ForTurn(ctx, a, t) })
}
func (s *faultStore) ByKey(ctx context.Context, a turnframe.AccountID, k turnframe.IdempotencyKey) (turnframe.JournalEntry, error) {
	return run(s, "ByKey", func() (turnframe.JournalEntry, error) { return s.inner.ByKey(ctx, a, k) })
}
func (s *faultStore) EventsByID(ctx context.Context, a turnframe.AccountID, ids []turnframe.EventID) ([]turnframe.StoredEvent, error) {
	return run(s, "EventsByID", func() ([]turnframe.StoredEvent, error) { return s.inner.EventsByID(ctx, a, ids) })
}
func (s *faultStore) EventsSince(ctx context.Context, a turnframe.AccountID, c turnframe.CaseKey, since turnframe.CaseRevision, limit int) ([]turnframe.StoredEvent, error) {
	return run(s, "EventsSince", func() ([]turnframe.StoredEvent, error) { return s.inner.EventsSince(ctx, a, c, since, limit) })
}
func (s *faultStore) CaseRevision(ctx context.Context, a turnframe.AccountID, c turnframe.CaseKey) (turnframe.CaseRevision, error) {
	return run(s, "CaseRevision", func() (turnframe.CaseRevision, error) { return s.inner.CaseRevision(ctx, a, c) })
}
func (s *faultStore) Replay(ctx context.Context, a turnframe.AccountID, t turnframe.TurnID) (turnframe.ReplayRecord, error) {
	return run(s, "Replay", func() (turnframe.ReplayRecord, error) { return s.inner.Replay(ctx, a, t) })
}
func (s *faultStore) ClaimDue(ctx context.Context, now time.Time, limit int, worker string, lease time.Duration) ([]turnframe.Claim, error) {
	return run(s, "ClaimDue", func() ([]turnframe.Claim, error) { return s.inner.ClaimDue(ctx, now, limit, worker, lease) })
}
func (s *faultStore) ExtendClaims(ctx context.Context, claims []turnframe.Claim, now time.Time, lease time.Duration) ([]error, error) {
	return run(s, "ExtendClaims", func() ([]error, error) { return s.inner.ExtendClaims(ctx, claims, now, lease) })
}
func (s *faultStore) Settle(ctx context.Context, sts []turnframe.OutboxSettlement) ([]error, error) {
	return run(s, "Settle", func() ([]error, error) { return s.inner.Settle(ctx, sts) })
}
func (s *faultStore) Resolve(ctx context.Context, res turnframe.Resolution) error {
	return run0(s, "Resolve", func() error { return s.inner.Resolve(ctx, res) })
}
func (s *faultStore) Requeue(ctx context.Context, id turnframe.OutboxID, attempts int, at time.Time) error {
	return run0(s, "Requeue", func() error { return s.inner.Requeue(ctx, id, attempts, at) })
}
func (s *faultStore) ExpireClaims(ctx context.Context, now time.Time) ([]turnframe.OutboxID, error) {
	return run(s, "ExpireClaims", func() ([]turnframe.OutboxID, error) { return s.inner.ExpireClaims(ctx, now) })
}
func (s *faultStore) ReleaseClaim(ctx context.Context, id turnframe.OutboxID, attempts int, now time.Time) error {
	return run0(s, "ReleaseClaim", func() error { return s.inner.ReleaseClaim(ctx, id, attempts, now) })
}
func (s *faultStore) GetOutbox(ctx context.Context, id turnframe.OutboxID) (turnframe.OutboxRecord, error) {
	return run(s, "GetOutbox", func() (turnframe.OutboxRecord, error) { return s.inner.GetOutbox(ctx, id) })
}
func (s *faultStore) ListOutbox(ctx context.Context, f turnframe.OutboxFilter) ([]turnframe.OutboxRecord, error) {
	return run(s, "ListOutbox", func() ([]turnframe.OutboxRecord, error) { return s.inner.ListOutbox(ctx, f) })
}
func (s *faultStore) Prune(ctx context.Context, before time.Time) (int, error) {
	return run(s, "Prune", func() (int, error) { return s.inner.Prune(ctx, before) })
}
func (s *faultStore) History(ctx context.Context, subject turnframe.Subject, after int64, limit int) ([]turnframe.HistoryRecord, error) {
	return run(s, "History", func() ([]turnframe.HistoryRecord, error) { return s.inner.History(ctx, subject, after, limit) })
}
func (s *faultStore) RecordEvidence(ctx context.Context, rec turnframe.HistoryRecord) error {
	return run0(s, "RecordEvidence", func() error { return s.inner.RecordEvidence(ctx, rec) })
}
func (s *faultStore) Close() error { return s.inner.Close() }
