package turnframe

import (
	"context"
	"fmt"
	"log/slog"
)

// RecoveryHandler acts on recovery's decisions, one method per action that
// needs one; Sweep calls it. Each method gets the turn's marker and the
// decision. A returned error is recorded in the SweepReport and the sweep
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
	// ReconcileExternal: ask the remote what happened to each unknown entry
	// and settle it with Runtime.ReconcileCommand. Never repeat it blindly.
	ReconcileExternal(ctx context.Context, turn TurnPhaseMarker, action RecoveryAction) error
}

// SweepReport is what one Sweep did.
type SweepReport struct {
	Turns    int                // turns listed and decided (or attempted), each once
	Actions  map[ActionKind]int // turns per action decided
	Failures []SweepFailure     // turns whose decision or handler failed
}

// SweepFailure is one turn a sweep could not finish.
type SweepFailure struct {
	Account AccountID
	Turn    TurnID
	Action  ActionKind // the decision, when one was made
	Err     error
}

// Sweep decides every unfinished turn in scope, oldest first, and hands
// each decision to the handler method of its kind; ActionNothing calls
// nothing. It reads the turns a page of limit at a time (RecoveryScope.After
// as the cursor) and goes on until it has seen every one, so turns a
// handler cannot finish yet (an unknown the remote cannot settle, a command
// in flight elsewhere) never keep it from those behind them; each turn is
// decided at most once per Sweep. One turn's failure — its decision or its
// handler — is recorded in the report and does not stop the sweep. The
// error return is for a listing alone (with the report of the pages before
// it).
//
// At start-up, before any turn is in flight, a zero scope sweeps everything.
// A sweep inside a running process should set scope.UpdatedBefore to a time
// older than any turn in flight, so it leaves them alone; should it meet one
// anyway, Execute will not run a command another attempt holds under a live
// lease (ResultInFlight).
func (r *Recovery) Sweep(ctx context.Context, scope RecoveryScope, limit int, h RecoveryHandler) (SweepReport, error) {
	if h == nil {
		return SweepReport{}, invalid("handler", "nil")
	}
	report := SweepReport{Actions: make(map[ActionKind]int)}
	for {
		markers, err := r.Unfinished(ctx, scope, limit)
		if err != nil {
			return report, fmt.Errorf("sweep: %w", err)
		}
		for _, m := range markers {
			r.recover(ctx, h, m, &report)
		}
		if len(markers) < limit {
			return report, nil
		}
		scope.After = markers[len(markers)-1].Turn
	}
}

// recover decides one turn and hands the decision to h, recording what
// happened in report.
func (r *Recovery) recover(ctx context.Context, h RecoveryHandler, m TurnPhaseMarker, report *SweepReport) {
	report.Turns++
	action, err := r.Decide(ctx, m.Account, m.Turn)
	if err == nil {
		report.Actions[action.Kind]++
		err = dispatchAction(ctx, h, m, action)
	}
	if err != nil {
		report.Failures = append(report.Failures, SweepFailure{Account: m.Account, Turn: m.Turn, Action: action.Kind, Err: err})
		r.obs.logf(ctx, slog.LevelWarn, "recovery sweep: turn not recovered",
			slog.String("turn", m.Turn.String()), slog.String("action", action.Kind.String()), slog.Any("error", err))
	}
}

func dispatchAction(ctx context.Context, h RecoveryHandler, m TurnPhaseMarker, a RecoveryAction) error {
	switch a.Kind {
	case ActionRestartInterpretation:
		return h.RestartInterpretation(ctx, m, a)
	case ActionResumeCommands:
		return h.ResumeCommands(ctx, m, a)
	case ActionRegenerateResponse:
		return h.RegenerateResponse(ctx, m, a)
	case ActionReconcileExternal:
		return h.ReconcileExternal(ctx, m, a)
	}
	return nil
}
