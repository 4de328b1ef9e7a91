package turnframe_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/storekit"
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
			Status: s, Attempt: attempt, LeaseUntil: lease, Code: "old", RemoteRef: "req-1"}
	}
	const (
		pending   = turnframe.JournalPending
		executing = turnframe.JournalExecuting
		committed = turnframe.JournalCommitted
		rejected  = turnframe.JournalRejected
		unknown   = turnframe.JournalOutcomeUnknown
		needs     = turnframe.JournalNeedsIntervention
		planned   = turnframe.PhasePlanned
		abandoned = turnframe.PhaseAbandoned
		app       = turnframe.Actor("")
		operator  = turnframe.ActorOperator
		policy    = turnframe.ActorPolicy
		recovery  = turnframe.ActorRecovery
	)
	worker := turnframe.WorkerActor("w1")
	cases := []struct {
		name           string
		from           turnframe.JournalEntry
		phase          turnframe.TurnPhase
		to             turnframe.JournalStatus
		attempt, prior turnframe.AttemptID
		actor          turnframe.Actor
		want           error
	}{
		// Takes and renewals.
		{"a new attempt takes a pending entry", entry(pending, none, time.Time{}), planned, executing, a1, none, app, nil},
		{"a take presenting a prior the entry is not under is refused", entry(pending, none, time.Time{}), planned, executing, a2, a1, app, turnframe.ErrConflict},
		{"a resent entry is taken by a new attempt presenting the last one", entry(pending, a1, time.Time{}), planned, executing, a2, a1, app, nil},
		{"a resent entry is not taken again by its last attempt", entry(pending, a1, time.Time{}), planned, executing, a1, a1, app, turnframe.ErrConflict},
		{"an attempt whose lease ended is taken over", entry(executing, a1, ended), planned, executing, a2, a1, app, nil},
		{"an attempt whose lease runs is not taken over", entry(executing, a1, live), planned, executing, a2, a1, app, turnframe.ErrConflict},
		{"a take-over presenting a stale prior is refused", entry(executing, a2, ended), planned, executing, a1, none, app, turnframe.ErrConflict},
		{"the holder renews its lease", entry(executing, a1, live), planned, executing, a1, none, app, nil},
		{"the holder renews a lease that ended", entry(executing, a1, ended), planned, executing, a1, none, app, nil},
		{"nothing is taken on an abandoned turn", entry(pending, none, time.Time{}), abandoned, executing, a1, none, app, turnframe.ErrConflict},
		{"nothing is taken over on an abandoned turn", entry(executing, a1, ended), abandoned, executing, a2, a1, app, turnframe.ErrConflict},
		// Settlements by the attempt that holds the entry.
		{"the attempt running on an abandoned turn still settles", entry(executing, a1, live), abandoned, unknown, a1, none, app, nil},
		{"the holder commits", entry(executing, a1, live), planned, committed, a1, none, app, nil},
		{"the holder rejects", entry(executing, a1, live), planned, rejected, a1, none, app, nil},
		{"the holder reports unknown", entry(executing, a1, ended), planned, unknown, a1, none, app, nil},
		{"the holder does not escalate", entry(executing, a1, live), planned, needs, a1, none, app, turnframe.ErrConflict},
		{"a superseded attempt does not commit", entry(executing, a2, live), planned, committed, a1, none, app, turnframe.ErrConflict},
		{"the holder puts its entry back to pending, before it called out", entry(executing, a1, live), planned, pending, a1, none, app, nil},
		{"a superseded attempt does not put the entry back", entry(executing, a2, live), planned, pending, a1, none, app, turnframe.ErrConflict},
		{"a reconciliation does not put a running entry back", entry(executing, a1, live), planned, pending, none, none, recovery, turnframe.ErrConflict},
		{"a reconciliation does not put a dead attempt back", entry(executing, a1, ended), planned, pending, none, none, recovery, turnframe.ErrConflict},
		{"a reconciliation does not put a stranded attempt back", entry(executing, a1, ended), abandoned, pending, none, none, app, turnframe.ErrConflict},
		// Reconciliations of an attempt that died.
		{"a reconciliation does not settle a running attempt", entry(executing, a1, live), planned, committed, none, none, app, turnframe.ErrConflict},
		{"a reconciliation does not declare a running attempt unknown", entry(executing, a1, live), planned, unknown, none, none, recovery, turnframe.ErrConflict},
		{"a reconciliation declares a dead attempt unknown once its lease ended", entry(executing, a1, ended), planned, unknown, none, none, recovery, nil},
		{"a reconciliation does not settle a dead attempt of a live turn", entry(executing, a1, ended), planned, committed, none, none, app, turnframe.ErrConflict},
		{"a reconciliation commits an attempt stranded on an abandoned turn", entry(executing, a1, ended), abandoned, committed, none, none, app, nil},
		{"a reconciliation rejects an attempt stranded on an abandoned turn", entry(executing, a1, ended), abandoned, rejected, none, none, app, nil},
		{"a reconciliation declares a stranded attempt unknown", entry(executing, a1, ended), abandoned, unknown, none, none, recovery, nil},
		{"a reconciliation does not resend a stranded attempt", entry(executing, a1, ended), abandoned, pending, none, none, app, turnframe.ErrConflict},
		{"a reconciliation does not escalate a dead attempt", entry(executing, a1, ended), abandoned, needs, none, none, policy, turnframe.ErrConflict},
		// Reconciliations of an unknown outcome.
		{"a reconciliation commits an unknown entry", entry(unknown, a1, time.Time{}), planned, committed, none, none, app, nil},
		{"a reconciliation rejects an unknown entry", entry(unknown, a1, time.Time{}), planned, rejected, none, none, app, nil},
		{"a reconciliation resends an unknown entry", entry(unknown, a1, time.Time{}), planned, pending, none, none, app, nil},
		{"the policy settles an unknown entry", entry(unknown, a1, time.Time{}), planned, committed, none, none, policy, nil},
		{"the policy escalates an unknown entry", entry(unknown, a1, time.Time{}), planned, needs, none, none, policy, nil},
		{"an unknown entry of an abandoned turn is escalated", entry(unknown, a1, time.Time{}), abandoned, needs, none, none, policy, nil},
		{"a resend on an abandoned turn is refused", entry(unknown, a1, time.Time{}), abandoned, pending, none, none, app, turnframe.ErrConflict},
		{"a reconciliation settles an unknown entry of an abandoned turn", entry(unknown, a1, time.Time{}), abandoned, committed, none, none, app, nil},
		{"an attempt does not move an unknown entry (I15)", entry(unknown, a1, time.Time{}), planned, rejected, a1, none, app, turnframe.ErrConflict},
		{"an attempt does not escalate an unknown entry", entry(unknown, a1, time.Time{}), planned, needs, a1, none, app, turnframe.ErrConflict},
		{"a superseded attempt does not overwrite an unknown outcome", entry(unknown, a2, time.Time{}), planned, committed, a1, none, app, turnframe.ErrConflict},
		{"an unknown entry is never taken again (I15)", entry(unknown, a1, time.Time{}), planned, executing, a2, a1, app, turnframe.ErrConflict},
		// An entry that needs intervention: the app or a person only.
		{"the app commits an entry that needs intervention", entry(needs, a1, time.Time{}), planned, committed, none, none, app, nil},
		{"an operator rejects an entry that needs intervention", entry(needs, a1, time.Time{}), planned, rejected, none, none, operator, nil},
		{"a named person resends an entry that needs intervention", entry(needs, a1, time.Time{}), planned, pending, none, none, "operator:alice", nil},
		{"a named app settles an entry that needs intervention", entry(needs, a1, time.Time{}), planned, committed, none, none, "app:billing", nil},
		{"a person settles one of an abandoned turn", entry(needs, a1, time.Time{}), abandoned, rejected, none, none, operator, nil},
		{"nobody resends one of an abandoned turn", entry(needs, a1, time.Time{}), abandoned, pending, none, none, operator, turnframe.ErrConflict},
		{"the policy does not settle an entry that needs intervention", entry(needs, a1, time.Time{}), planned, committed, none, none, policy, turnframe.ErrConflict},
		{"recovery does not resend an entry that needs intervention", entry(needs, a1, time.Time{}), planned, pending, none, none, recovery, turnframe.ErrConflict},
		{"a worker does not reject an entry that needs intervention", entry(needs, a1, time.Time{}), planned, rejected, none, none, worker, turnframe.ErrConflict},
		{"an attempt does not settle an entry that needs intervention", entry(needs, a1, time.Time{}), planned, committed, a1, none, app, turnframe.ErrConflict},
		{"an entry that needs intervention is not escalated again", entry(needs, a1, time.Time{}), planned, needs, none, none, app, turnframe.ErrConflict},
		{"an entry that needs intervention does not go back to unknown", entry(needs, a1, time.Time{}), planned, unknown, none, none, app, turnframe.ErrConflict},
		{"an entry that needs intervention is never taken", entry(needs, a1, time.Time{}), planned, executing, a2, a1, app, turnframe.ErrConflict},
		// Final and early statuses.
		// A local attempt settles a pending entry without a take.
		{"a local attempt commits a pending entry", entry(pending, none, time.Time{}), planned, committed, a1, none, app, nil},
		{"a local attempt rejects a pending entry", entry(pending, none, time.Time{}), planned, rejected, a1, none, app, nil},
		{"a local attempt reports a pending entry unknown", entry(pending, none, time.Time{}), planned, unknown, a1, none, app, nil},
		{"a local attempt settles a resent entry presenting its last attempt", entry(pending, a1, time.Time{}), planned, committed, a2, a1, app, nil},
		{"a local attempt presenting a stale prior is refused", entry(pending, a1, time.Time{}), planned, committed, a2, none, app, turnframe.ErrConflict},
		{"a local attempt reusing the entry's last attempt is refused", entry(pending, a1, time.Time{}), planned, committed, a1, a1, app, turnframe.ErrConflict},
		{"a local attempt does not settle on an abandoned turn", entry(pending, none, time.Time{}), abandoned, committed, a1, none, app, turnframe.ErrConflict},
		{"a reconciliation does not commit a pending entry", entry(pending, none, time.Time{}), planned, committed, none, none, app, turnframe.ErrConflict},
		{"a local attempt does not escalate a pending entry", entry(pending, none, time.Time{}), planned, needs, a1, none, policy, turnframe.ErrConflict},
		{"a pending entry does not stay pending", entry(pending, none, time.Time{}), planned, pending, a1, none, app, turnframe.ErrConflict},
		// Final and early statuses.
		{"a pending entry is not escalated", entry(pending, none, time.Time{}), planned, needs, none, none, policy, turnframe.ErrConflict},
		{"a committed entry is final", entry(committed, a1, time.Time{}), planned, executing, a2, a1, app, turnframe.ErrConflict},
		{"a committed entry is not escalated", entry(committed, a1, time.Time{}), planned, needs, none, none, operator, turnframe.ErrConflict},
		{"a rejected entry is final", entry(rejected, a1, time.Time{}), planned, pending, none, none, app, turnframe.ErrConflict},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			s := turnframe.Settlement{Key: "k1", To: c.to, Attempt: c.attempt, Prior: c.prior, Lease: time.Minute, Code: "c"}
			next, err := storekit.NextEntry(c.from, s, nil, c.phase, c.actor, t0)
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
			keepsCode := c.to != executing        // a take or a renewal starts without a reason
			is.Equal(next.Code == "c", keepsCode) // the settlement's code, where the status has one
		})
	}
	t.Run("a take counts an attempt and a renewal does not", func(t *testing.T) {
		is := is.New(t)
		take := turnframe.Settlement{Key: "k1", To: executing, Attempt: a1, Lease: time.Minute}
		next, err := storekit.NextEntry(entry(pending, none, time.Time{}), take, nil, planned, app, t0)
		is.NoErr(err)
		is.Equal(next.Attempts, 1)
		is.Equal(next.Attempt, a1)
		renewed, err := storekit.NextEntry(next, take, nil, planned, app, t0.Add(time.Second))
		is.NoErr(err)
		is.Equal(renewed.Attempts, 1)                                 // the same attempt
		is.Equal(renewed.LeaseUntil, t0.Add(time.Second+time.Minute)) // its lease moved
	})
	t.Run("a local attempt counts an attempt and is recorded on the entry", func(t *testing.T) {
		is := is.New(t)
		local := turnframe.Settlement{Key: "k1", To: committed, Attempt: a2, Prior: a1}
		before := entry(pending, a1, time.Time{})
		before.Attempts = 1
		next, err := storekit.NextEntry(before, local, nil, planned, app, t0)
		is.NoErr(err)
		is.Equal(next.Attempts, 2)   // counted as a take counts it
		is.Equal(next.Attempt, a2)   // the attempt that ran
		is.Equal(next.RemoteRef, "") // a commit from Pending keeps no earlier reference
	})
	t.Run("a commit records its event ids", func(t *testing.T) {
		is := is.New(t)
		ev := turnframe.StoredEvent{ID: gen.EventID(t0), Event: turnframe.Event{Case: "booking/1", Type: "booked"}}
		next, err := storekit.NextEntry(entry(executing, a1, live), turnframe.Settlement{Key: "k1", To: committed, Attempt: a1}, []turnframe.StoredEvent{ev}, planned, app, t0)
		is.NoErr(err)
		is.Equal(next.EventIDs, []turnframe.EventID{ev.ID})
	})
	t.Run("a commit of another case's event is invalid", func(t *testing.T) {
		is := is.New(t)
		ev := turnframe.StoredEvent{ID: gen.EventID(t0), Event: turnframe.Event{Case: "booking/2", Type: "booked"}}
		_, err := storekit.NextEntry(entry(executing, a1, live), turnframe.Settlement{Key: "k1", To: committed, Attempt: a1}, []turnframe.StoredEvent{ev}, planned, app, t0)
		is.True(errors.Is(err, turnframe.ErrInvalid))
	})
	refs := []struct {
		name string
		from turnframe.JournalEntry
		s    turnframe.Settlement
		want string
	}{
		{"a reconciliation's commit keeps the remote's reference", entry(unknown, a1, time.Time{}),
			turnframe.Settlement{Key: "k1", To: committed, RemoteRef: "ch_1"}, "ch_1"},
		{"an unknown outcome keeps the remote's reference", entry(executing, a1, live),
			turnframe.Settlement{Key: "k1", To: unknown, Attempt: a1, RemoteRef: "req-2"}, "req-2"},
		{"an escalation keeps the reference the entry had when it gives none", entry(unknown, a1, time.Time{}),
			turnframe.Settlement{Key: "k1", To: needs}, "req-1"},
		{"a reconciliation's commit without a reference keeps the one the unknown had", entry(unknown, a1, time.Time{}),
			turnframe.Settlement{Key: "k1", To: committed}, "req-1"},
		{"an escalation takes the reference it gives", entry(unknown, a1, time.Time{}),
			turnframe.Settlement{Key: "k1", To: needs, RemoteRef: "req-3"}, "req-3"},
		{"a resend forgets the reference", entry(unknown, a1, time.Time{}),
			turnframe.Settlement{Key: "k1", To: pending}, ""},
	}
	for _, c := range refs {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			next, err := storekit.NextEntry(c.from, c.s, nil, planned, policy, t0)
			is.NoErr(err)
			is.Equal(next.RemoteRef, c.want) // the reference
		})
	}
}

// Only the application and people move what needs intervention:
// turnframe's own recovery, policy and dispatch workers never do.
func TestActorMayIntervene(t *testing.T) {
	cases := []struct {
		actor turnframe.Actor
		want  bool
	}{
		{turnframe.ActorApp, true},
		{turnframe.ActorOperator, true},
		{"operator:alice", true},
		{"app:billing-ui", true},
		{turnframe.ActorRecovery, false},
		{turnframe.ActorPolicy, false},
		{turnframe.WorkerActor("w1"), false},
		{"worker:", false},
	}
	for _, c := range cases {
		t.Run(string(c.actor), func(t *testing.T) {
			is := is.New(t)
			is.Equal(c.actor.MayIntervene(), c.want) // may intervene
			is.NoErr(c.actor.Validate())             // and is an actor
		})
	}
	for _, bad := range []turnframe.Actor{"", turnframe.Actor(strings.Repeat("a", 201)), "operator:\talice", "app\x00"} {
		t.Run(fmt.Sprintf("invalid %q", bad), func(t *testing.T) {
			is := is.New(t)
			is.True(errors.Is(bad.Validate(), turnframe.ErrInvalid)) // not an actor
		})
	}
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
			got, adopt, err := storekit.Readmit(c.existing, c.phase, c.cmd, newTurn, t0)
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
		_, adopt, err := storekit.Readmit(entry(turnframe.JournalPending, time.Time{}), turnframe.PhaseAbandoned, cmd, oldTurn, t0)
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
			is.Equal(storekit.AdvancePhase(c.from, c.to, c.pending), c.want)
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
	row := storekit.NewOutboxRecord(gen.OutboxID(t0), "acct", gen.TurnID(t0), "k1", 0, 1,
		turnframe.OutboxMessage{Destination: "payments", Payload: []byte("x")}, t0)
	claimedAt := t0.Add(time.Second)
	claimedRow, claim := storekit.ClaimRow(row, "w1", claimedAt, time.Minute)

	t.Run("EnqueueIsPendingDueAtCommit", func(t *testing.T) {
		is := is.New(t)
		is.Equal(row.Status, turnframe.OutboxPending)
		is.Equal(row.DueAt, t0)
		is.Equal(row.Attempts, 0)
		is.Equal(row.Key, turnframe.IdempotencyKey("k1"))
	})
	t.Run("NotBeforeDelaysTheDueTime", func(t *testing.T) {
		is := is.New(t)
		later := storekit.NewOutboxRecord(gen.OutboxID(t0), "acct", gen.TurnID(t0), "k1", 1, 2,
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
			next, err := storekit.SettleRow(claimedRow, settle(to))
			is.NoErr(err)
			is.Equal(next.Status, to)
			is.Equal(next.FinishedAt.IsZero(), !to.IsFinished()) // only completed and failed rows finish
			is.Equal(next.LastCode, "c")                         // the sender's code, whatever the status
			is.True(next.LeaseUntil.IsZero())                    // no lease once settled
		})
	}
	released, err := storekit.ReleaseRow(claimedRow, 0, t0.Add(time.Hour))
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
			_, err := storekit.SettleRow(c.row, settle(turnframe.OutboxCompleted))
			is.True(errors.Is(err, turnframe.ErrClaimLost))
			_, err = storekit.ExtendRow(c.row, claim, t0, time.Hour)
			is.True(errors.Is(err, turnframe.ErrClaimLost)) // nor is its lease extended
		})
	}
	t.Run("ExtendMovesTheLeaseForwardOnly", func(t *testing.T) {
		is := is.New(t)
		next, err := storekit.ExtendRow(claimedRow, claim, claimedAt.Add(10*time.Second), time.Minute)
		is.NoErr(err)
		is.Equal(next.LeaseUntil, claimedAt.Add(70*time.Second))
		same, err := storekit.ExtendRow(next, claim, claimedAt, time.Second)
		is.NoErr(err)
		is.Equal(same.LeaseUntil, next.LeaseUntil) // an earlier end never shortens it
	})
	unknownRow, err := storekit.SettleRow(claimedRow, settle(turnframe.OutboxOutcomeUnknown))
	if err != nil {
		t.Fatal(err)
	}
	needsRow, err := storekit.ResolveRow(unknownRow, turnframe.Resolution{ID: unknownRow.ID, Verdict: turnframe.VerdictEscalate, Code: "esc", Actor: turnframe.ActorPolicy, Now: t0.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	completedRow, err := storekit.SettleRow(claimedRow, settle(turnframe.OutboxCompleted))
	if err != nil {
		t.Fatal(err)
	}
	failedRow, err := storekit.SettleRow(claimedRow, settle(turnframe.OutboxFailed))
	if err != nil {
		t.Fatal(err)
	}
	const (
		completed = turnframe.VerdictCompleted
		failed    = turnframe.VerdictFailed
		resend    = turnframe.VerdictResend
		escalate  = turnframe.VerdictEscalate
	)
	resolveAt := t0.Add(time.Hour)
	resolutions := []struct {
		name    string
		row     turnframe.OutboxRecord
		verdict turnframe.Verdict
		actor   turnframe.Actor
		ref     string
		want    turnframe.OutboxStatus
		err     error
	}{
		{"an unknown row is completed", unknownRow, completed, "", "ch_1", turnframe.OutboxCompleted, nil},
		{"an unknown row is failed", unknownRow, failed, "", "", turnframe.OutboxFailed, nil},
		{"an unknown row is resent", unknownRow, resend, "", "", turnframe.OutboxPending, nil},
		{"an unknown row is escalated", unknownRow, escalate, "", "", turnframe.OutboxNeedsIntervention, nil},
		{"the policy completes an unknown row", unknownRow, completed, turnframe.ActorPolicy, "", turnframe.OutboxCompleted, nil},
		{"the policy resends an unknown row", unknownRow, resend, turnframe.ActorPolicy, "", turnframe.OutboxPending, nil},
		{"the policy escalates an unknown row", unknownRow, escalate, turnframe.ActorPolicy, "", turnframe.OutboxNeedsIntervention, nil},
		{"an unresolved verdict is invalid", unknownRow, turnframe.VerdictUnresolved, "", "", 0, turnframe.ErrInvalid},
		{"a verdict that is none is invalid", unknownRow, turnframe.Verdict(9), "", "", 0, turnframe.ErrInvalid},
		{"the app completes a row that needs intervention", needsRow, completed, "", "ch_2", turnframe.OutboxCompleted, nil},
		{"an operator fails a row that needs intervention", needsRow, failed, turnframe.ActorOperator, "", turnframe.OutboxFailed, nil},
		{"a named person resends a row that needs intervention", needsRow, resend, "operator:alice", "", turnframe.OutboxPending, nil},
		{"the policy does not settle a row that needs intervention", needsRow, completed, turnframe.ActorPolicy, "", 0, turnframe.ErrConflict},
		{"recovery does not resend a row that needs intervention", needsRow, resend, turnframe.ActorRecovery, "", 0, turnframe.ErrConflict},
		{"a worker does not fail a row that needs intervention", needsRow, failed, turnframe.WorkerActor("w1"), "", 0, turnframe.ErrConflict},
		{"a row that needs intervention is not escalated again", needsRow, escalate, turnframe.ActorOperator, "", 0, turnframe.ErrConflict},
		{"a pending row is not resolved", row, completed, "", "", 0, turnframe.ErrConflict},
		{"a dispatching row is not resolved", claimedRow, completed, "", "", 0, turnframe.ErrConflict},
		{"a completed row is not resolved", completedRow, resend, "", "", 0, turnframe.ErrConflict},
		{"a failed row is not resolved", failedRow, resend, turnframe.ActorOperator, "", 0, turnframe.ErrConflict},
		{"a completed row is not escalated", completedRow, escalate, "", "", 0, turnframe.ErrConflict},
	}
	for _, c := range resolutions {
		t.Run("Resolve: "+c.name, func(t *testing.T) {
			is := is.New(t)
			res := turnframe.Resolution{ID: c.row.ID, Verdict: c.verdict, Code: "code", RemoteRef: c.ref, Actor: c.actor, Note: "why", Now: resolveAt}
			next, err := storekit.ResolveRow(c.row, res)
			if c.err != nil {
				is.True(errors.Is(err, c.err)) // refused
				return
			}
			is.NoErr(err)
			is.Equal(next.Status, c.want)           // moved by verdict
			is.Equal(next.LastCode, "code")         // the resolution's code
			is.Equal(next.UpdatedAt, resolveAt)     // at its time
			is.Equal(next.Attempts, c.row.Attempts) // attempts kept: a resend is the same row
			wantRef := c.row.RemoteRef              // "r", from the unknown settlement
			if c.ref != "" {
				wantRef = c.ref
			}
			is.Equal(next.RemoteRef, wantRef) // the reference given, or the one it had
			if c.want.IsFinished() {
				is.Equal(next.FinishedAt, resolveAt) // finished now
			} else {
				is.True(next.FinishedAt.IsZero()) // not finished
			}
			if c.want == turnframe.OutboxPending {
				is.Equal(next.DueAt, resolveAt) // due again at once
			}
		})
	}
	expiries := []struct {
		name string
		row  turnframe.OutboxRecord
		at   time.Time
		want error
	}{
		{"a claim expires when its lease ends", claimedRow, claimedRow.LeaseUntil, nil},
		{"a claim expires after its lease ended", claimedRow, claimedRow.LeaseUntil.Add(time.Hour), nil},
		{"a claim does not expire while its lease runs", claimedRow, claimedRow.LeaseUntil.Add(-time.Microsecond), turnframe.ErrConflict},
		{"a pending row does not expire", row, t0.Add(time.Hour), turnframe.ErrConflict},
		{"an unknown row does not expire", unknownRow, t0.Add(time.Hour), turnframe.ErrConflict},
		{"a row that needs intervention does not expire", needsRow, t0.Add(time.Hour), turnframe.ErrConflict},
		{"a completed row does not expire", completedRow, t0.Add(time.Hour), turnframe.ErrConflict},
	}
	for _, c := range expiries {
		t.Run("Expire: "+c.name, func(t *testing.T) {
			is := is.New(t)
			next, err := storekit.ExpireRow(c.row, c.at)
			if c.want != nil {
				is.True(errors.Is(err, c.want)) // refused
				return
			}
			is.NoErr(err)
			is.Equal(next.Status, turnframe.OutboxOutcomeUnknown) // its send may have started: unknown, never pending
			is.Equal(next.LastCode, turnframe.CodeLeaseEnded)     // saying why
			is.Equal(next.UpdatedAt, c.at)                        // at the expiry
			is.True(next.LeaseUntil.IsZero())                     // no lease
			is.Equal(next.Attempts, c.row.Attempts)               // attempts kept
			_, err = storekit.SettleRow(next, settle(turnframe.OutboxCompleted))
			is.True(errors.Is(err, turnframe.ErrClaimLost)) // the claim that held it settles nothing
		})
	}
	t.Run("RequeueOnlyFailedWithAFreshBudget", func(t *testing.T) {
		is := is.New(t)
		failed, err := storekit.SettleRow(claimedRow, settle(turnframe.OutboxFailed))
		is.NoErr(err)
		next, err := storekit.RequeueRow(failed, 0, t0.Add(time.Hour))
		is.NoErr(err)
		is.Equal(next.Status, turnframe.OutboxPending)
		is.True(next.FinishedAt.IsZero())
		is.Equal(next.Attempts, 1)    // attempt numbers keep rising
		is.Equal(next.AttemptBase, 1) // the new budget starts after them
		_, err = storekit.RequeueRow(unknownRow, 0, t0)
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
		_, err := storekit.ReleaseRow(row, 0, t0)
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
			err := storekit.CheckAdmit(p)
			is.Equal(errors.Is(err, turnframe.ErrConflict), p.IsTerminal()) // only a terminal turn refuses
		})
	}
}
