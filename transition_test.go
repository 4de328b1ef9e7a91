package turnframe_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestNextPhase(t *testing.T) {
	P := func(p turnframe.TurnPhase) turnframe.TurnPhase { return p }
	cases := []struct {
		name     string
		from, to turnframe.TurnPhase
		pending  int
		want     error
	}{
		{"ReceivedToPlanned skips ahead", P(turnframe.PhaseReceived), turnframe.PhasePlanned, 1, nil},
		{"PlannedToExecuting", turnframe.PhasePlanned, turnframe.PhaseExecuting, 1, nil},
		{"ExecutingToCommitted when all settled", turnframe.PhaseExecuting, turnframe.PhaseCommitted, 0, nil},
		{"ExecutingToCommitted with one pending is refused", turnframe.PhaseExecuting, turnframe.PhaseCommitted, 1, turnframe.ErrConflict},
		{"CommittedToDelivered", turnframe.PhaseCommitted, turnframe.PhaseDelivered, 0, nil},
		{"PlannedToDelivered with pending is refused", turnframe.PhasePlanned, turnframe.PhaseDelivered, 2, turnframe.ErrConflict},
		{"SameNonTerminalPhase is allowed", turnframe.PhaseExecuting, turnframe.PhaseExecuting, 1, nil},
		{"Backwards is refused", turnframe.PhaseCommitted, turnframe.PhaseExecuting, 0, turnframe.ErrConflict},
		{"AnyNonTerminalToAbandoned", turnframe.PhaseExecuting, turnframe.PhaseAbandoned, 3, nil},
		{"DeliveredIsTerminal", turnframe.PhaseDelivered, turnframe.PhaseAbandoned, 0, turnframe.ErrConflict},
		{"DeliveredTwice is refused", turnframe.PhaseDelivered, turnframe.PhaseDelivered, 0, turnframe.ErrConflict},
		{"AbandonedIsTerminal", turnframe.PhaseAbandoned, turnframe.PhasePlanned, 0, turnframe.ErrConflict},
		{"Unset is not a destination", turnframe.PhaseReceived, turnframe.PhaseUnset, 0, turnframe.ErrInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			err := turnframe.NextPhase(c.from, c.to, c.pending)
			if c.want == nil {
				is.NoErr(err)
				return
			}
			is.True(errors.Is(err, c.want)) // the refusal's class
		})
	}
}

func TestNextEntry(t *testing.T) {
	gen := turnframe.NewIDGenerator()
	a1, a2 := gen.AttemptID(t0), gen.AttemptID(t0)
	entry := func(s turnframe.JournalStatus, attempt turnframe.AttemptID) turnframe.JournalEntry {
		return turnframe.JournalEntry{Account: "acct", Command: turnframe.Command{Key: "k1", Case: "booking/1", Name: "book"}, Status: s, Attempt: attempt}
	}
	const (
		pending   = turnframe.JournalPending
		executing = turnframe.JournalExecuting
		committed = turnframe.JournalCommitted
		rejected  = turnframe.JournalRejected
		unknown   = turnframe.JournalOutcomeUnknown
	)
	cases := []struct {
		name    string
		from    turnframe.JournalEntry
		to      turnframe.JournalStatus
		attempt turnframe.AttemptID
		want    error
	}{
		{"PendingToExecuting", entry(pending, turnframe.AttemptID{}), executing, a1, nil},
		{"ExecutingToExecuting under a new attempt", entry(executing, a1), executing, a2, nil},
		{"ExecutingToCommitted", entry(executing, a1), committed, a1, nil},
		{"ExecutingToRejected", entry(executing, a1), rejected, a1, nil},
		{"ExecutingToUnknown", entry(executing, a1), unknown, a1, nil},
		{"ExecutingToCommitted by a superseded attempt is refused", entry(executing, a2), committed, a1, turnframe.ErrConflict},
		{"UnknownToCommitted by reconciliation", entry(unknown, a1), committed, turnframe.AttemptID{}, nil},
		{"UnknownToRejected by reconciliation", entry(unknown, a1), rejected, turnframe.AttemptID{}, nil},
		{"UnknownToPending by reconciliation", entry(unknown, a1), pending, turnframe.AttemptID{}, nil},
		{"UnknownToExecuting is refused (I15)", entry(unknown, a1), executing, a2, turnframe.ErrConflict},
		{"PendingToCommitted is refused", entry(pending, turnframe.AttemptID{}), committed, a1, turnframe.ErrConflict},
		{"CommittedIsFinal", entry(committed, a1), executing, a2, turnframe.ErrConflict},
		{"RejectedIsFinal", entry(rejected, a1), pending, a2, turnframe.ErrConflict},
		{"ExecutingToPending is refused", entry(executing, a1), pending, a1, turnframe.ErrConflict},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			next, err := turnframe.NextEntry(c.from, turnframe.Settlement{Key: "k1", To: c.to, Attempt: c.attempt, Code: "c"}, nil, t0)
			if c.want != nil {
				is.True(errors.Is(err, c.want)) // refused
				return
			}
			is.NoErr(err)
			is.Equal(next.Status, c.to)
			is.Equal(next.UpdatedAt, t0)
		})
	}
	t.Run("ExecutingCountsAttempts", func(t *testing.T) {
		is := is.New(t)
		next, err := turnframe.NextEntry(entry(pending, turnframe.AttemptID{}), turnframe.Settlement{Key: "k1", To: executing, Attempt: a1}, nil, t0)
		is.NoErr(err)
		is.Equal(next.Attempts, 1)
		is.Equal(next.Attempt, a1)
	})
	t.Run("CommitRecordsEventIDs", func(t *testing.T) {
		is := is.New(t)
		ev := turnframe.StoredEvent{ID: gen.EventID(t0), Event: turnframe.Event{Case: "booking/1", Type: "booked"}}
		next, err := turnframe.NextEntry(entry(executing, a1), turnframe.Settlement{Key: "k1", To: committed, Attempt: a1}, []turnframe.StoredEvent{ev}, t0)
		is.NoErr(err)
		is.Equal(next.EventIDs, []turnframe.EventID{ev.ID})
	})
	t.Run("CommitOfAnotherCasesEventIsInvalid", func(t *testing.T) {
		is := is.New(t)
		ev := turnframe.StoredEvent{ID: gen.EventID(t0), Event: turnframe.Event{Case: "booking/2", Type: "booked"}}
		_, err := turnframe.NextEntry(entry(executing, a1), turnframe.Settlement{Key: "k1", To: committed, Attempt: a1}, []turnframe.StoredEvent{ev}, t0)
		is.True(errors.Is(err, turnframe.ErrInvalid))
	})
}

func TestOutboxRowMachine(t *testing.T) {
	gen := turnframe.NewIDGenerator()
	row := turnframe.NewOutboxRecord(gen.OutboxID(t0), "acct", gen.TurnID(t0), "k1", 0, 1,
		turnframe.OutboxMessage{Destination: "payments", Payload: []byte("x")}, t0)
	claimedRow, claim := turnframe.ClaimRow(row, "w1", t0.Add(time.Second))

	t.Run("EnqueueIsPendingDueAtCommit", func(t *testing.T) {
		is := is.New(t)
		is.Equal(row.Status, turnframe.OutboxPending)
		is.Equal(row.DueAt, t0)
		is.Equal(row.Attempts, 0)
		is.Equal(row.Key, turnframe.IdempotencyKey("k1"))
	})
	t.Run("NotBeforeDelaysTheDueTime", func(t *testing.T) {
		is := is.New(t)
		later := turnframe.NewOutboxRecord(gen.OutboxID(t0), "acct", gen.TurnID(t0), "k1", 1, 2,
			turnframe.OutboxMessage{Destination: "payments", NotBefore: t0.Add(time.Hour)}, t0)
		is.Equal(later.DueAt, t0.Add(time.Hour))
		is.Equal(later.Key, turnframe.IdempotencyKey("k1/2"))
	})
	t.Run("ClaimCountsAnAttempt", func(t *testing.T) {
		is := is.New(t)
		is.Equal(claimedRow.Status, turnframe.OutboxDispatching)
		is.Equal(claimedRow.Attempts, 1)
		is.Equal(claim.Attempts, 1)
		is.Equal(claimedRow.ClaimedBy, "w1")
	})
	settle := func(to turnframe.OutboxStatus) turnframe.OutboxSettlement {
		return turnframe.OutboxSettlement{Claim: claim, To: to, Code: "c", RemoteRef: "r", RetryAt: t0.Add(time.Minute), Now: t0.Add(2 * time.Second)}
	}
	for _, to := range []turnframe.OutboxStatus{turnframe.OutboxCompleted, turnframe.OutboxPending, turnframe.OutboxFailed, turnframe.OutboxOutcomeUnknown} {
		t.Run("SettleHoldingTheClaimTo_"+to.String(), func(t *testing.T) {
			is := is.New(t)
			next, err := turnframe.SettleRow(claimedRow, settle(to))
			is.NoErr(err)
			is.Equal(next.Status, to)
			is.Equal(next.FinishedAt.IsZero(), !to.IsFinished()) // only completed and failed rows finish
		})
	}
	lost := []struct {
		name string
		row  func() turnframe.OutboxRecord
	}{
		{"AnotherWorker", func() turnframe.OutboxRecord { r := claimedRow; r.ClaimedBy = "w2"; return r }},
		{"ALaterAttempt", func() turnframe.OutboxRecord { r := claimedRow; r.Attempts = 2; return r }},
		{"AlreadySettled", func() turnframe.OutboxRecord { r := claimedRow; r.Status = turnframe.OutboxCompleted; return r }},
		{"Released", func() turnframe.OutboxRecord { return turnframe.ReleaseRow(claimedRow, t0.Add(time.Hour)) }},
	}
	for _, c := range lost {
		t.Run("SettleWithoutTheClaimIsClaimLost_"+c.name, func(t *testing.T) {
			is := is.New(t)
			_, err := turnframe.SettleRow(c.row(), settle(turnframe.OutboxCompleted))
			is.True(errors.Is(err, turnframe.ErrClaimLost))
		})
	}
	unknownRow, err := turnframe.SettleRow(claimedRow, settle(turnframe.OutboxOutcomeUnknown))
	if err != nil {
		t.Fatal(err)
	}
	for v, want := range map[turnframe.Verdict]turnframe.OutboxStatus{
		turnframe.VerdictCompleted: turnframe.OutboxCompleted,
		turnframe.VerdictFailed:    turnframe.OutboxFailed,
		turnframe.VerdictResend:    turnframe.OutboxPending,
	} {
		t.Run("ResolveUnknown_"+v.String(), func(t *testing.T) {
			is := is.New(t)
			next, err := turnframe.ResolveRow(unknownRow, v, "code", t0.Add(time.Hour))
			is.NoErr(err)
			is.Equal(next.Status, want)
			is.Equal(next.Attempts, 1) // a resend keeps its attempts
		})
	}
	t.Run("ResolveUnresolvedIsInvalid", func(t *testing.T) {
		is := is.New(t)
		_, err := turnframe.ResolveRow(unknownRow, turnframe.VerdictUnresolved, "", t0)
		is.True(errors.Is(err, turnframe.ErrInvalid))
	})
	t.Run("ResolveAnythingButUnknownIsConflict", func(t *testing.T) {
		is := is.New(t)
		_, err := turnframe.ResolveRow(claimedRow, turnframe.VerdictCompleted, "", t0)
		is.True(errors.Is(err, turnframe.ErrConflict))
	})
	t.Run("RequeueOnlyFailed", func(t *testing.T) {
		is := is.New(t)
		failed, err := turnframe.SettleRow(claimedRow, settle(turnframe.OutboxFailed))
		is.NoErr(err)
		next, err := turnframe.RequeueRow(failed, t0.Add(time.Hour))
		is.NoErr(err)
		is.Equal(next.Status, turnframe.OutboxPending)
		is.True(next.FinishedAt.IsZero())
		_, err = turnframe.RequeueRow(unknownRow, t0)
		is.True(errors.Is(err, turnframe.ErrConflict)) // an unknown row is never requeued (I15)
	})
	t.Run("OnlyOldClaimsExpire", func(t *testing.T) {
		is := is.New(t)
		is.True(turnframe.ClaimExpired(claimedRow, t0.Add(time.Hour)))
		is.True(!turnframe.ClaimExpired(claimedRow, claimedRow.ClaimedAt))
		is.True(!turnframe.ClaimExpired(row, t0.Add(time.Hour))) // a pending row holds no claim
	})
}

func TestRemoteKey(t *testing.T) {
	entry := func(account, key string) turnframe.OutboxEntry {
		return turnframe.OutboxEntry{Account: turnframe.AccountID(account), Key: turnframe.IdempotencyKey(key)}
	}
	t.Run("TwoTenantsSameKeyDiffer", func(t *testing.T) {
		is := is.New(t)
		is.True(entry("a", "k1").RemoteKey() != entry("b", "k1").RemoteKey())
	})
	t.Run("IsUnambiguous", func(t *testing.T) {
		is := is.New(t)
		is.True(entry("a.b", "c").RemoteKey() != entry("a", "b.c").RemoteKey())
	})
	t.Run("IsDeterministic", func(t *testing.T) {
		is := is.New(t)
		is.Equal(entry("acct", "k1").RemoteKey(), entry("acct", "k1").RemoteKey())
	})
	t.Run("FitsIn255BytesAtTheLimits", func(t *testing.T) {
		is := is.New(t)
		long := entry(strings.Repeat("a", turnframe.MaxAccountLen), strings.Repeat("k", turnframe.MaxKeyLen)+"/12")
		is.True(len(long.RemoteKey()) <= 255)
		other := entry(strings.Repeat("a", turnframe.MaxAccountLen), strings.Repeat("k", turnframe.MaxKeyLen)+"/13")
		is.True(long.RemoteKey() != other.RemoteKey())
	})
}

func TestCheckAdmit(t *testing.T) {
	for p := turnframe.PhaseReceived; p <= turnframe.PhaseAbandoned; p++ {
		t.Run(p.String(), func(t *testing.T) {
			is := is.New(t)
			err := turnframe.CheckAdmit(p)
			is.Equal(errors.Is(err, turnframe.ErrConflict), p.IsTerminal()) // only a terminal turn refuses
		})
	}
}
