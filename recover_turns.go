package turnframe

import (
	"context"
	"fmt"
	"runtime/debug"
)

// RecoveryHandler acts on recovery's decisions about turns, one method per
// action the application must carry out; Recovery.Recover calls it. Unknown
// outcomes are not the handler's: Recover resolves them by policy, and
// Recovery.Settle settles the rest. Each method gets the turn's marker and
// the decision. A returned error is recorded in the report and Recover
// goes on with the next turn.
type RecoveryHandler interface {
	// RestartInterpretation: interpret the turn's text again; nothing was
	// admitted, so nothing can have happened.
	RestartInterpretation(ctx context.Context, turn TurnPhaseMarker, action RecoveryAction) error
	// ResumeCommands: run the pending entries again through
	// Runtime.Execute, which resumes them by key.
	ResumeCommands(ctx context.Context, turn TurnPhaseMarker, action RecoveryAction) error
	// RegenerateResponse: answer from action.Events and action.AnswerTasks,
	// then Runtime.Deliver. Execute nothing.
	RegenerateResponse(ctx context.Context, turn TurnPhaseMarker, action RecoveryAction) error
}

// SweepReport is what one Recover did with the unfinished turns.
type SweepReport struct {
	Turns    int                // turns listed and decided (or attempted), each once
	Actions  map[ActionKind]int // turns per action finally decided
	Failures []SweepFailure     // turns whose decision or handler failed
}

// SweepFailure is one turn Recover could not finish.
type SweepFailure struct {
	Account AccountID
	Turn    TurnID
	Action  ActionKind // the decision, when one was made
	Err     error
}

// dispatchAction hands a decision to the handler method of its kind;
// ActionNothing and ActionReconcileExternal (what the policy left) call
// nothing. A panic of the handler is recovered and returned as the turn's
// error (with its value and stack): one bad turn must not
// end the recovery pass, or the process, at every start-up.
func dispatchAction(ctx context.Context, h RecoveryHandler, m TurnPhaseMarker, a RecoveryAction) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("recovery handler %v panicked: %v\n%s", a.Kind, p, debug.Stack())
		}
	}()
	switch a.Kind {
	case ActionRestartInterpretation:
		return h.RestartInterpretation(ctx, m, a)
	case ActionResumeCommands:
		return h.ResumeCommands(ctx, m, a)
	case ActionRegenerateResponse:
		return h.RegenerateResponse(ctx, m, a)
	}
	return nil
}
