package turnframe_test

import (
	"errors"
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
		{turnframe.OutboxPending, "pending"},
		{turnframe.OutboxDispatching, "dispatching"},
		{turnframe.OutboxCompleted, "completed"},
		{turnframe.OutboxFailed, "failed"},
		{turnframe.OutboxOutcomeUnknown, "outcome_unknown"},
		{turnframe.VerdictUnresolved, "unresolved"},
		{turnframe.VerdictCompleted, "completed"},
		{turnframe.VerdictFailed, "failed"},
		{turnframe.VerdictResend, "resend"},
		{turnframe.ActionNothing, "nothing"},
		{turnframe.ActionRestartInterpretation, "restart_interpretation"},
		{turnframe.ActionResumeCommands, "resume_commands"},
		{turnframe.ActionRegenerateResponse, "regenerate_response"},
		{turnframe.ActionReconcileExternal, "reconcile_external"},
		{turnframe.TurnPhase(99), "phase(99)"},
	}
	for _, c := range cases {
		t.Run(c.want, func(t *testing.T) {
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
	for s := turnframe.OutboxPending; s <= turnframe.OutboxOutcomeUnknown; s++ {
		got, err := turnframe.ParseOutboxStatus(s.String())
		is.NoErr(err)
		is.Equal(got, s)
	}
	for s := turnframe.JournalPending; s <= turnframe.JournalOutcomeUnknown; s++ {
		got, err := turnframe.ParseJournalStatus(s.String())
		is.NoErr(err)
		is.Equal(got, s)
	}
	for _, bad := range []string{"", "unset", "Pending", "done"} {
		_, err := turnframe.ParseOutboxStatus(bad)
		is.True(errors.Is(err, turnframe.ErrInvalid)) // not a status
	}
}
