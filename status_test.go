package turnframe_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// The names are stored in databases and printed by the CLI: they must never
// change.
func TestStatusNamesAreStable(t *testing.T) {
	cases := []struct {
		got  interface{ String() string }
		want string
	}{
		{turnframe.PhaseReceived, "received"},
		{turnframe.PhaseInterpreted, "interpreted"},
		{turnframe.PhasePlanned, "planned"},
		{turnframe.PhaseExecuting, "executing"},
		{turnframe.PhaseCommitted, "committed"},
		{turnframe.PhaseDelivered, "delivered"},
		{turnframe.PhaseAbandoned, "abandoned"},
		{turnframe.JournalPending, "pending"},
		{turnframe.JournalExecuting, "executing"},
		{turnframe.JournalCommitted, "committed"},
		{turnframe.JournalRejected, "rejected"},
		{turnframe.JournalOutcomeUnknown, "outcome_unknown"},
		{turnframe.JournalNeedsIntervention, "needs_intervention"},
		{turnframe.OutboxPending, "pending"},
		{turnframe.OutboxDispatching, "dispatching"},
		{turnframe.OutboxCompleted, "completed"},
		{turnframe.OutboxFailed, "failed"},
		{turnframe.OutboxOutcomeUnknown, "outcome_unknown"},
		{turnframe.OutboxNeedsIntervention, "needs_intervention"},
		{turnframe.VerdictUnresolved, "unresolved"},
		{turnframe.VerdictCompleted, "completed"},
		{turnframe.VerdictFailed, "failed"},
		{turnframe.VerdictResend, "resend"},
		{turnframe.VerdictEscalate, "escalate"},
		{turnframe.ActionNothing, "nothing"},
		{turnframe.ActionRestartInterpretation, "restart_interpretation"},
		{turnframe.ActionResumeCommands, "resume_commands"},
		{turnframe.ActionRegenerateResponse, "regenerate_response"},
		{turnframe.ActionReconcileExternal, "reconcile_external"},
		{turnframe.SubjectJournal, "journal"},
		{turnframe.SubjectOutbox, "outbox"},
		{turnframe.SubjectTurn, "turn"},
		{turnframe.RemoteUndeclared, "undeclared"},
		{turnframe.RemoteNeither, "neither"},
		{turnframe.RemoteDeduplicates, "deduplicates"},
		{turnframe.RemoteVerifiable, "verifiable"},
		{turnframe.FoundUnsure, "unsure"},
		{turnframe.FoundHappened, "happened"},
		{turnframe.FoundNotHappened, "not_happened"},
		{turnframe.PolicyLeft, "left"},
		{turnframe.PolicyWaiting, "waiting"},
		{turnframe.PolicyUnsure, "unsure"},
		{turnframe.PolicyCompleted, "completed"},
		{turnframe.PolicyResent, "resent"},
		{turnframe.PolicyRejected, "rejected"},
		{turnframe.PolicyEscalated, "escalated"},
		{turnframe.TurnPhase(99), "phase(99)"},
		{turnframe.JournalStatus(99), "journal status(99)"},
		{turnframe.OutboxStatus(99), "outbox status(99)"},
		{turnframe.Verdict(99), "verdict(99)"},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%T/%s", c.got, c.want), func(t *testing.T) {
			is := is.New(t)
			is.Equal(c.got.String(), c.want)
		})
	}
}

func TestStatusesParseBack(t *testing.T) {
	is := is.New(t)
	for p := turnframe.PhaseReceived; p <= turnframe.PhaseAbandoned; p++ {
		got, err := turnframe.ParseTurnPhase(p.String())
		is.NoErr(err)
		is.Equal(got, p)
	}
	for s := turnframe.OutboxPending; s <= turnframe.OutboxNeedsIntervention; s++ {
		got, err := turnframe.ParseOutboxStatus(s.String())
		is.NoErr(err)
		is.Equal(got, s)
	}
	for s := turnframe.JournalPending; s <= turnframe.JournalAwaitingApproval; s++ {
		got, err := turnframe.ParseJournalStatus(s.String())
		is.NoErr(err)
		is.Equal(got, s)
	}
	for v := turnframe.VerdictUnresolved; v <= turnframe.VerdictEscalate; v++ {
		got, err := turnframe.ParseVerdict(v.String())
		is.NoErr(err)
		is.Equal(got, v)
	}
	for k := turnframe.SubjectJournal; k <= turnframe.SubjectTurn; k++ {
		got, err := turnframe.ParseSubjectKind(k.String())
		is.NoErr(err)
		is.Equal(got, k)
	}
	for _, bad := range []string{"", "unset", "Pending", "done", "needs-intervention"} {
		_, err := turnframe.ParseOutboxStatus(bad)
		is.True(errors.Is(err, turnframe.ErrInvalid)) // not an outbox status
		_, err = turnframe.ParseJournalStatus(bad)
		is.True(errors.Is(err, turnframe.ErrInvalid)) // not a journal status
	}
	for _, bad := range []string{"", "unset", "escalated", "Resend"} {
		_, err := turnframe.ParseVerdict(bad)
		is.True(errors.Is(err, turnframe.ErrInvalid)) // not a verdict
	}
}

// Both uncertain statuses are uncertain, and only they; a row that needs
// intervention holds its order key as an unknown one does.
func TestUncertainStatuses(t *testing.T) {
	for s := turnframe.JournalPending; s <= turnframe.JournalAwaitingApproval; s++ {
		t.Run("journal/"+s.String(), func(t *testing.T) {
			is := is.New(t)
			want := s == turnframe.JournalOutcomeUnknown || s == turnframe.JournalNeedsIntervention
			is.Equal(s.IsUncertain(), want)                                 // uncertain
			is.True(!(s.IsUncertain() && (s.IsPending() || s.IsSettled()))) // and neither pending nor settled
			is.Equal(s.IsAwaitingApproval(), s == turnframe.JournalAwaitingApproval)
			is.True(!(s.IsAwaitingApproval() && (s.IsPending() || s.IsSettled() || s.IsUncertain()))) // awaiting is none of the others
		})
	}
	for s := turnframe.OutboxPending; s <= turnframe.OutboxNeedsIntervention; s++ {
		t.Run("outbox/"+s.String(), func(t *testing.T) {
			is := is.New(t)
			want := s == turnframe.OutboxOutcomeUnknown || s == turnframe.OutboxNeedsIntervention
			is.Equal(s.IsUncertain(), want)           // uncertain
			is.Equal(s.HoldsOrder(), !s.IsFinished()) // every status but completed and failed holds its order key
		})
	}
}

// The actors turnframe writes are stable names in the audit trail.
func TestActorNamesAreStable(t *testing.T) {
	is := is.New(t)
	got := []turnframe.Actor{turnframe.ActorApp, turnframe.ActorRecovery, turnframe.ActorPolicy, turnframe.ActorOperator, turnframe.WorkerActor("w1")}
	is.Equal(got, []turnframe.Actor{"app", "recovery", "policy", "operator", "worker:w1"})
}

func TestVerdictStatusesAreWhereASettlementMovesTo(t *testing.T) {
	for _, tc := range []struct {
		v     turnframe.Verdict
		entry turnframe.JournalStatus
		row   turnframe.OutboxStatus
		moves bool
	}{
		{turnframe.VerdictUnresolved, 0, 0, false},
		{turnframe.VerdictCompleted, turnframe.JournalCommitted, turnframe.OutboxCompleted, true},
		{turnframe.VerdictFailed, turnframe.JournalRejected, turnframe.OutboxFailed, true},
		{turnframe.VerdictResend, turnframe.JournalPending, turnframe.OutboxPending, true},
		{turnframe.VerdictEscalate, turnframe.JournalNeedsIntervention, turnframe.OutboxNeedsIntervention, true},
		{turnframe.Verdict(99), 0, 0, false},
	} {
		t.Run(tc.v.String(), func(t *testing.T) {
			is := is.New(t)
			entry, ok := tc.v.JournalStatus()
			is.Equal(ok, tc.moves) // whether it moves an entry
			if ok {
				is.Equal(entry, tc.entry)
			}
			row, ok := tc.v.OutboxStatus()
			is.Equal(ok, tc.moves) // whether it moves a row
			if ok {
				is.Equal(row, tc.row)
			}
		})
	}
}
