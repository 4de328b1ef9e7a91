package turnframe_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math/rand/v2"
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
	var none turnframe.AttemptID
	live, ended := t0.Add(time.Minute), t0 // a lease that runs after t0, and one that ended at t0
	entry := func(s turnframe.JournalStatus, attempt turnframe.AttemptID, lease time.Time) turnframe.JournalEntry {
		return turnframe.JournalEntry{Account: "acct", Command: turnframe.Command{Key: "k1", Case: "booking/1", Name: "book"},
			Status: s, Attempt: attempt, LeaseUntil: lease}
	}
	const (
		pending   = turnframe.JournalPending
		executing = turnframe.JournalExecuting
		committed = turnframe.JournalCommitted
		rejected  = turnframe.JournalRejected
		unknown   = turnframe.JournalOutcomeUnknown
		planned   = turnframe.PhasePlanned
		abandoned = turnframe.PhaseAbandoned
	)
	cases := []struct {
		name           string
		from           turnframe.JournalEntry
		phase          turnframe.TurnPhase
		to             turnframe.JournalStatus
		attempt, prior turnframe.AttemptID
		want           error
	}{
		{"a new attempt takes a pending entry", entry(pending, none, time.Time{}), planned, executing, a1, none, nil},
		{"a take presenting a prior the entry is not under is refused", entry(pending, none, time.Time{}), planned, executing, a2, a1, turnframe.ErrConflict},
		{"a resent entry is taken by a new attempt presenting the last one", entry(pending, a1, time.Time{}), planned, executing, a2, a1, nil},
		{"a resent entry is not taken again by its last attempt", entry(pending, a1, time.Time{}), planned, executing, a1, a1, turnframe.ErrConflict},
		{"an attempt whose lease ended is taken over", entry(executing, a1, ended), planned, executing, a2, a1, nil},
		{"an attempt whose lease runs is not taken over", entry(executing, a1, live), planned, executing, a2, a1, turnframe.ErrConflict},
		{"a take-over presenting a stale prior is refused", entry(executing, a2, ended), planned, executing, a1, none, turnframe.ErrConflict},
		{"the holder renews its lease", entry(executing, a1, live), planned, executing, a1, none, nil},
		{"the holder renews a lease that ended", entry(executing, a1, ended), planned, executing, a1, none, nil},
		{"nothing is taken on an abandoned turn", entry(pending, none, time.Time{}), abandoned, executing, a1, none, turnframe.ErrConflict},
		{"nothing is taken over on an abandoned turn", entry(executing, a1, ended), abandoned, executing, a2, a1, turnframe.ErrConflict},
		{"the attempt running on an abandoned turn still settles", entry(executing, a1, live), abandoned, unknown, a1, none, nil},
		{"the holder commits", entry(executing, a1, live), planned, committed, a1, none, nil},
		{"the holder rejects", entry(executing, a1, live), planned, rejected, a1, none, nil},
		{"the holder reports unknown", entry(executing, a1, ended), planned, unknown, a1, none, nil},
		{"a superseded attempt does not commit", entry(executing, a2, live), planned, committed, a1, none, turnframe.ErrConflict},
		{"a reconciliation does not settle a running attempt", entry(executing, a1, live), planned, committed, none, none, turnframe.ErrConflict},
		{"a reconciliation commits an unknown entry", entry(unknown, a1, time.Time{}), planned, committed, none, none, nil},
		{"a reconciliation rejects an unknown entry", entry(unknown, a1, time.Time{}), planned, rejected, none, none, nil},
		{"a reconciliation resends an unknown entry", entry(unknown, a1, time.Time{}), planned, pending, none, none, nil},
		{"a resend on an abandoned turn is refused", entry(unknown, a1, time.Time{}), abandoned, pending, none, none, turnframe.ErrConflict},
		{"a reconciliation settles an unknown entry of an abandoned turn", entry(unknown, a1, time.Time{}), abandoned, committed, none, none, nil},
		{"an attempt does not move an unknown entry (I15)", entry(unknown, a1, time.Time{}), planned, rejected, a1, none, turnframe.ErrConflict},
		{"a superseded attempt does not overwrite an unknown outcome", entry(unknown, a2, time.Time{}), planned, committed, a1, none, turnframe.ErrConflict},
		{"an unknown entry is never taken again (I15)", entry(unknown, a1, time.Time{}), planned, executing, a2, a1, turnframe.ErrConflict},
		{"a pending entry is not committed", entry(pending, none, time.Time{}), planned, committed, a1, none, turnframe.ErrConflict},
		{"a committed entry is final", entry(committed, a1, time.Time{}), planned, executing, a2, a1, turnframe.ErrConflict},
		{"a rejected entry is final", entry(rejected, a1, time.Time{}), planned, pending, none, none, turnframe.ErrConflict},
		{"a running entry does not go back to pending", entry(executing, a1, live), planned, pending, a1, none, turnframe.ErrConflict},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			s := turnframe.Settlement{Key: "k1", To: c.to, Attempt: c.attempt, Prior: c.prior, Lease: time.Minute, Code: "c"}
			next, err := turnframe.NextEntry(c.from, s, nil, c.phase, t0)
			if c.want != nil {
				is.True(errors.Is(err, c.want)) // refused
				return
			}
			is.NoErr(err)
			is.Equal(next.Status, c.to)
			is.Equal(next.UpdatedAt, t0)
			if c.to == executing {
				is.Equal(next.Attempt, c.attempt)              // under the attempt that took or renewed it
				is.Equal(next.LeaseUntil, t0.Add(time.Minute)) // leased from now
			} else {
				is.True(next.LeaseUntil.IsZero()) // no lease outside Executing
			}
		})
	}
	t.Run("a take counts an attempt and a renewal does not", func(t *testing.T) {
		is := is.New(t)
		take := turnframe.Settlement{Key: "k1", To: executing, Attempt: a1, Lease: time.Minute}
		next, err := turnframe.NextEntry(entry(pending, none, time.Time{}), take, nil, planned, t0)
		is.NoErr(err)
		is.Equal(next.Attempts, 1)
		is.Equal(next.Attempt, a1)
		renewed, err := turnframe.NextEntry(next, take, nil, planned, t0.Add(time.Second))
		is.NoErr(err)
		is.Equal(renewed.Attempts, 1)                                 // the same attempt
		is.Equal(renewed.LeaseUntil, t0.Add(time.Second+time.Minute)) // its lease moved
	})
	t.Run("a commit records its event ids", func(t *testing.T) {
		is := is.New(t)
		ev := turnframe.StoredEvent{ID: gen.EventID(t0), Event: turnframe.Event{Case: "booking/1", Type: "booked"}}
		next, err := turnframe.NextEntry(entry(executing, a1, live), turnframe.Settlement{Key: "k1", To: committed, Attempt: a1}, []turnframe.StoredEvent{ev}, planned, t0)
		is.NoErr(err)
		is.Equal(next.EventIDs, []turnframe.EventID{ev.ID})
	})
	t.Run("a commit of another case's event is invalid", func(t *testing.T) {
		is := is.New(t)
		ev := turnframe.StoredEvent{ID: gen.EventID(t0), Event: turnframe.Event{Case: "booking/2", Type: "booked"}}
		_, err := turnframe.NextEntry(entry(executing, a1, live), turnframe.Settlement{Key: "k1", To: committed, Attempt: a1}, []turnframe.StoredEvent{ev}, planned, t0)
		is.True(errors.Is(err, turnframe.ErrInvalid))
	})
}

func TestReadmit(t *testing.T) {
	gen := turnframe.NewIDGenerator()
	oldTurn, newTurn := gen.TurnID(t0), gen.TurnID(t0)
	cmd := turnframe.Command{Key: "k1", Case: "booking/1", Name: "book", Payload: []byte("2")}
	entry := func(s turnframe.JournalStatus, lease time.Time) turnframe.JournalEntry {
		return turnframe.JournalEntry{Account: "acct", Turn: oldTurn, Command: cmd, Status: s, LeaseUntil: lease}
	}
	cases := []struct {
		name      string
		existing  turnframe.JournalEntry
		phase     turnframe.TurnPhase
		cmd       turnframe.Command
		wantAdopt bool
		want      error
	}{
		{"a pending command of an abandoned turn is adopted", entry(turnframe.JournalPending, time.Time{}), turnframe.PhaseAbandoned, cmd, true, nil},
		{"a running command of an abandoned turn is adopted once its lease ended", entry(turnframe.JournalExecuting, t0), turnframe.PhaseAbandoned, cmd, true, nil},
		{"a running command of an abandoned turn is not adopted under a live lease", entry(turnframe.JournalExecuting, t0.Add(time.Second)), turnframe.PhaseAbandoned, cmd, false, nil},
		{"a settled command of an abandoned turn stays", entry(turnframe.JournalCommitted, time.Time{}), turnframe.PhaseAbandoned, cmd, false, nil},
		{"an unknown command of an abandoned turn stays", entry(turnframe.JournalOutcomeUnknown, time.Time{}), turnframe.PhaseAbandoned, cmd, false, nil},
		{"a pending command of a live turn stays", entry(turnframe.JournalPending, time.Time{}), turnframe.PhasePlanned, cmd, false, nil},
		{"a pending command of a delivered turn stays", entry(turnframe.JournalPending, time.Time{}), turnframe.PhaseDelivered, cmd, false, nil},
		{"another command under the key is a conflict", entry(turnframe.JournalPending, time.Time{}), turnframe.PhaseAbandoned,
			turnframe.Command{Key: "k1", Case: "booking/1", Name: "book", Payload: []byte("3")}, false, turnframe.ErrConflict},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			got, adopt, err := turnframe.Readmit(c.existing, c.phase, c.cmd, newTurn, t0)
			if c.want != nil {
				is.True(errors.Is(err, c.want)) // refused
				return
			}
			is.NoErr(err)
			is.Equal(adopt, c.wantAdopt) // adopted or not
			want := c.existing
			if c.wantAdopt {
				want.Turn, want.UpdatedAt = newTurn, t0
			}
			is.Equal(got.Turn, want.Turn)
			is.Equal(got.UpdatedAt, want.UpdatedAt)
			is.Equal(got.Status, want.Status) // the status never changes on re-admission
		})
	}
	t.Run("a key readmitted by its own turn is never adopted", func(t *testing.T) {
		is := is.New(t)
		_, adopt, err := turnframe.Readmit(entry(turnframe.JournalPending, time.Time{}), turnframe.PhaseAbandoned, cmd, oldTurn, t0)
		is.NoErr(err)
		is.True(!adopt)
	})
}

func TestAdvancePhase(t *testing.T) {
	cases := []struct {
		name     string
		from, to turnframe.TurnPhase
		pending  int
		want     turnframe.TurnPhase
	}{
		{"moves when allowed", turnframe.PhaseExecuting, turnframe.PhaseCommitted, 0, turnframe.PhaseCommitted},
		{"stays while an entry is pending", turnframe.PhaseExecuting, turnframe.PhaseCommitted, 1, turnframe.PhaseExecuting},
		{"stays on an abandoned turn", turnframe.PhaseAbandoned, turnframe.PhaseCommitted, 0, turnframe.PhaseAbandoned},
		{"stays on a delivered turn", turnframe.PhaseDelivered, turnframe.PhaseCommitted, 0, turnframe.PhaseDelivered},
		{"never goes back", turnframe.PhaseCommitted, turnframe.PhaseExecuting, 0, turnframe.PhaseCommitted},
		{"unset moves nothing", turnframe.PhasePlanned, turnframe.PhaseUnset, 0, turnframe.PhasePlanned},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			is.Equal(turnframe.AdvancePhase(c.from, c.to, c.pending), c.want)
		})
	}
}

func TestOutboxKey(t *testing.T) {
	is := is.New(t)
	is.Equal(turnframe.OutboxKey("k", 0, 1), turnframe.IdempotencyKey("k"))   // one row keeps the key
	is.Equal(turnframe.OutboxKey("k", 0, 2), turnframe.IdempotencyKey("k~1")) // several are numbered
	is.Equal(turnframe.OutboxKey("k", 1, 2), turnframe.IdempotencyKey("k~2"))
	is.Equal(turnframe.OutboxKey("k", 11, 12), turnframe.IdempotencyKey("k~12"))
	// The key scheme that collided: command "k" with two rows gave "k/1",
	// the key of a command keyed "k/1". Now every command key is valid and
	// no row key of a several-row command is one.
	for _, key := range []turnframe.IdempotencyKey{"k/1", "k~1"} {
		err := key.Validate()
		is.Equal(err != nil, key == "k~1") // only the separator is refused
	}
	// Commands of one account, each committing 1 to 3 rows: no two rows
	// share a key.
	seen := map[turnframe.IdempotencyKey]bool{}
	for j, k := range []turnframe.IdempotencyKey{"k", "k/1", "k/2", "k1", "k-1", "k 1", "k/1/1", "k/3"} {
		n := 1 + j%3
		for i := range n {
			rk := turnframe.OutboxKey(k, i, n)
			is.True(!seen[rk]) // no two rows share a key
			seen[rk] = true
			if n > 1 {
				is.True(rk.Validate() != nil) // and none of several is a command key
			}
		}
	}
}

func TestOutboxRowMachine(t *testing.T) {
	gen := turnframe.NewIDGenerator()
	row := turnframe.NewOutboxRecord(gen.OutboxID(t0), "acct", gen.TurnID(t0), "k1", 0, 1,
		turnframe.OutboxMessage{Destination: "payments", Payload: []byte("x")}, t0)
	claimedAt := t0.Add(time.Second)
	claimedRow, claim := turnframe.ClaimRow(row, "w1", claimedAt, time.Minute)

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
		is.Equal(later.Key, turnframe.IdempotencyKey("k1~2"))
	})
	t.Run("ClaimCountsAnAttemptAndLeasesTheRow", func(t *testing.T) {
		is := is.New(t)
		is.Equal(claimedRow.Status, turnframe.OutboxDispatching)
		is.Equal(claimedRow.Attempts, 1)
		is.Equal(claim.Attempts, 1)
		is.Equal(claimedRow.ClaimedBy, "w1")
		is.Equal(claimedRow.LeaseUntil, claimedAt.Add(time.Minute)) // the row's lease
		is.Equal(claim.LeaseUntil, claimedAt.Add(time.Minute))      // and the claim's
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
			is.Equal(next.LastCode, "c")                         // the sender's code, whatever the status
			is.True(next.LeaseUntil.IsZero())                    // no lease once settled
		})
	}
	released, err := turnframe.ReleaseRow(claimedRow, t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	lost := []struct {
		name string
		row  turnframe.OutboxRecord
	}{
		{"AnotherWorker", func() turnframe.OutboxRecord { r := claimedRow; r.ClaimedBy = "w2"; return r }()},
		{"ALaterAttempt", func() turnframe.OutboxRecord { r := claimedRow; r.Attempts = 2; return r }()},
		{"AlreadySettled", func() turnframe.OutboxRecord { r := claimedRow; r.Status = turnframe.OutboxCompleted; return r }()},
		{"Released", released},
	}
	for _, c := range lost {
		t.Run("SettleWithoutTheClaimIsClaimLost_"+c.name, func(t *testing.T) {
			is := is.New(t)
			_, err := turnframe.SettleRow(c.row, settle(turnframe.OutboxCompleted))
			is.True(errors.Is(err, turnframe.ErrClaimLost))
			_, err = turnframe.ExtendRow(c.row, claim, t0, time.Hour)
			is.True(errors.Is(err, turnframe.ErrClaimLost)) // nor is its lease extended
		})
	}
	t.Run("ExtendMovesTheLeaseForwardOnly", func(t *testing.T) {
		is := is.New(t)
		next, err := turnframe.ExtendRow(claimedRow, claim, claimedAt.Add(10*time.Second), time.Minute)
		is.NoErr(err)
		is.Equal(next.LeaseUntil, claimedAt.Add(70*time.Second))
		same, err := turnframe.ExtendRow(next, claim, claimedAt, time.Second)
		is.NoErr(err)
		is.Equal(same.LeaseUntil, next.LeaseUntil) // an earlier end never shortens it
	})
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
	t.Run("RequeueOnlyFailedWithAFreshBudget", func(t *testing.T) {
		is := is.New(t)
		failed, err := turnframe.SettleRow(claimedRow, settle(turnframe.OutboxFailed))
		is.NoErr(err)
		next, err := turnframe.RequeueRow(failed, t0.Add(time.Hour))
		is.NoErr(err)
		is.Equal(next.Status, turnframe.OutboxPending)
		is.True(next.FinishedAt.IsZero())
		is.Equal(next.Attempts, 1)    // attempt numbers keep rising
		is.Equal(next.AttemptBase, 1) // the new budget starts after them
		_, err = turnframe.RequeueRow(unknownRow, t0)
		is.True(errors.Is(err, turnframe.ErrConflict)) // an unknown row is never requeued (I15)
	})
	t.Run("OnlyEndedLeasesAreReleased", func(t *testing.T) {
		is := is.New(t)
		end := claimedRow.LeaseUntil
		is.True(turnframe.LeaseEnded(claimedRow, end))                         // ended at its end
		is.True(!turnframe.LeaseEnded(claimedRow, end.Add(-time.Microsecond))) // running just before
		is.True(!turnframe.LeaseEnded(row, t0.Add(time.Hour)))                 // a pending row holds no claim
		is.Equal(released.Status, turnframe.OutboxPending)
		is.Equal(released.DueAt, claimedRow.DueAt) // due again at once, in its place
		is.Equal(released.Attempts, 1)             // attempts kept
		is.True(released.LeaseUntil.IsZero())
		_, err := turnframe.ReleaseRow(row, t0)
		is.True(errors.Is(err, turnframe.ErrConflict)) // only a dispatching row is released
	})
}

func TestRemoteKey(t *testing.T) {
	entry := func(account, key string) turnframe.OutboxEntry {
		return turnframe.OutboxEntry{Account: turnframe.AccountID(account), Key: turnframe.IdempotencyKey(key)}
	}
	t.Run("has the documented forms", func(t *testing.T) {
		is := is.New(t)
		is.Equal(entry("acct", "k1").RemoteKey(), "4.acct.k1")         // printable ASCII as it is
		is.Equal(entry("acct", "k 1").RemoteKey(), "4.acct.k 1")       // an inner space survives a header
		is.Equal(entry("acct", "k1 ").RemoteKey(), "x4.acct.k1%20")    // a trailing one would not: encoded
		is.Equal(entry("café", "k%").RemoteKey(), "x9.caf%C3%A9.k%25") // non-ASCII and '%' encoded
		is.Equal(entry("a", `\t`).RemoteKey(), `1.a.\t`)               // a backslash is printable
		long := entry(strings.Repeat("a", 128), strings.Repeat("k", 255))
		sum := sha256.Sum256([]byte("128." + strings.Repeat("a", 128) + "." + strings.Repeat("k", 255)))
		is.Equal(long.RemoteKey(), hex.EncodeToString(sum[:])) // too long: the hash of the plain form
	})
	t.Run("tells apart what a header would merge or a naive join would confuse", func(t *testing.T) {
		is := is.New(t)
		pairs := [][2]turnframe.OutboxEntry{
			{entry("a", "k1"), entry("b", "k1")},     // two tenants
			{entry("a.b", "c"), entry("a", "b.c")},   // the separator inside a part
			{entry("a", "k1"), entry("a", "k1 ")},    // trailing white space, trimmed by HTTP
			{entry("a", "k1"), entry("a", "k1\t")},   // a trailing tab
			{entry("a", "k%201"), entry("a", "k 1")}, // an encoding and its decoding
			{entry("a", "x4.acct.k1"), entry("acct", "k1")},
		}
		for _, p := range pairs {
			is.True(p[0].RemoteKey() != p[1].RemoteKey()) // distinct
		}
	})
	t.Run("is header-safe, bounded and injective over many keys", func(t *testing.T) {
		is := is.New(t)
		rng := rand.New(rand.NewPCG(11, 12))
		alphabet := []string{"a", "b", " ", ".", "%", "~", "/", "é", "\t", "\x00", "\x7f", "1", "x"}
		seen := map[string][2]string{}
		for range 20000 {
			acc, key := randString(rng, alphabet, 1+rng.IntN(4)), randString(rng, alphabet, 1+rng.IntN(5))
			if rng.IntN(50) == 0 {
				key += strings.Repeat("k", 250) // now and then one that must be hashed
			}
			got := entry(acc, key).RemoteKey()
			is.True(len(got) <= 255)                                      // bounded
			is.True(headerSafe(got))                                      // survives any HTTP hop
			if prev, ok := seen[got]; ok && prev != [2]string{acc, key} { // injective
				t.Fatalf("%q and %q give one remote key %q", prev, [2]string{acc, key}, got)
			}
			seen[got] = [2]string{acc, key}
		}
	})
}

// randString draws n pieces of alphabet.
func randString(rng *rand.Rand, alphabet []string, n int) string {
	var b strings.Builder
	for range n {
		b.WriteString(alphabet[rng.IntN(len(alphabet))])
	}
	return b.String()
}

// headerSafe reports whether v travels as an HTTP header value unchanged:
// visible ASCII and inner spaces only, nothing a server would trim.
func headerSafe(v string) bool {
	if v == "" || v[0] == ' ' || v[len(v)-1] == ' ' {
		return false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < ' ' || v[i] > '~' {
			return false
		}
	}
	return true
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
