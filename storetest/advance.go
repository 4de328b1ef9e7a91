package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// The rules of Write.Advance (issue 11 item 2): a settlement always lands;
// the turn's phase moves with it only when NextPhase allows the move once
// everything else of the Write is applied, and Applied.Phase says where
// the turn is.

func advanceTests() []test {
	return []test{
		{"AdvanceMovesTheTurnToCommittedWhenNothingIsLeftPending", testAdvanceMoves},
		{"AdvanceLandsTheSettlementAndKeepsThePhaseWhenTheTurnWasAbandonedMeanwhile", testAdvanceAbandoned},
		{"AdvanceLandsTheSettlementAndKeepsThePhaseWhileAnotherEntryIsPending", testAdvancePending},
		{"AdvanceMovesAPlannedTurnToExecutingWhenPendingEntriesKeepItFromCommitted", testAdvanceFromPlanned},
	}
}

// advanceCommit returns the Write committing attempt of key with one event
// on c and one outbox row, advancing the turn to Committed.
func advanceCommit(account turnframe.AccountID, turn turnframe.TurnID, key turnframe.IdempotencyKey, c turnframe.CaseKey, attempt turnframe.AttemptID, now time.Time) turnframe.Write {
	w := commitWrite(account, turn, key, attempt, now, []turnframe.Event{{Case: c, Type: "booked"}}, []turnframe.OutboxMessage{message("")})
	w.Advance = turnframe.PhaseCommitted
	return w
}

func testAdvanceMoves(t *testing.T, e *env) {
	is := is.New(t)
	turn := e.turnIn(acme, turnframe.PhaseExecuting, at(0))
	k1, k2 := e.freshKey(), e.freshKey()
	e.admit(acme, turn, at(0), command(k1, "booking/1"), command(k2, "booking/2"))
	a1 := e.execute(acme, turn, k1, at(0))
	a2 := e.execute(acme, turn, k2, at(0))

	a := e.apply(advanceCommit(acme, turn, k1, "booking/1", a1, at(time.Second)))
	is.Equal(a.Phase, turnframe.PhaseExecuting)             // k2 still runs: the turn stays
	is.Equal(e.phase(acme, turn), turnframe.PhaseExecuting) // as stored

	a = e.apply(advanceCommit(acme, turn, k2, "booking/2", a2, at(2*time.Second)))
	is.Equal(a.Settled[0].Status, turnframe.JournalCommitted) // the last settlement lands
	is.Equal(a.Phase, turnframe.PhaseCommitted)               // and the turn moves to Committed with it
	is.Equal(e.phase(acme, turn), turnframe.PhaseCommitted)   // as stored
}

func testAdvanceAbandoned(t *testing.T, e *env) {
	is := is.New(t)
	turn, key, attempt := e.running(acme, "booking/1", at(0))
	e.apply(turnframe.Write{Account: acme, Turn: turn, Now: at(time.Second), Phase: turnframe.PhaseAbandoned}) // abandoned while the handler ran

	a := e.apply(advanceCommit(acme, turn, key, "booking/1", attempt, at(2*time.Second)))
	is.Equal(a.Phase, turnframe.PhaseAbandoned)                     // the phase stays, and Applied says so
	is.Equal(e.phase(acme, turn), turnframe.PhaseAbandoned)         // as stored
	is.Equal(e.entry(acme, key).Status, turnframe.JournalCommitted) // the settlement landed
	is.Equal(len(a.Events), 1)                                      // with its event
	is.Equal(len(a.Outbox), 1)                                      // and its outbox row
	is.Equal(e.row(a.Outbox[0].ID).Status, turnframe.OutboxPending) // enqueued
	rev, err := e.s.CaseRevision(e.ctx, acme, "booking/1")
	is.NoErr(err)                            // revision
	is.Equal(rev, turnframe.CaseRevision(1)) // the event is appended
}

func testAdvancePending(t *testing.T, e *env) {
	is := is.New(t)
	turn := e.turnIn(acme, turnframe.PhaseExecuting, at(0))
	unknown, running := e.freshKey(), e.freshKey()
	e.admit(acme, turn, at(0), command(unknown, "booking/1"), command(running, "booking/2"))
	u := e.execute(acme, turn, unknown, at(0))
	e.settle(acme, turn, at(0), turnframe.Settlement{Key: unknown, To: turnframe.JournalOutcomeUnknown, Attempt: u})
	attempt := e.execute(acme, turn, running, at(0))
	e.settle(acme, turn, at(time.Second), turnframe.Settlement{Key: unknown, To: turnframe.JournalPending}) // a reconciliation puts it back meanwhile

	a := e.apply(advanceCommit(acme, turn, running, "booking/2", attempt, at(2*time.Second)))
	is.Equal(a.Phase, turnframe.PhaseExecuting)                         // another entry is pending: the phase stays
	is.Equal(e.phase(acme, turn), turnframe.PhaseExecuting)             // as stored
	is.Equal(e.entry(acme, running).Status, turnframe.JournalCommitted) // the settlement landed
	is.Equal(e.entry(acme, unknown).Status, turnframe.JournalPending)   // the other entry is left to run
}

// testAdvanceFromPlanned: a local command's settlement straight from
// Pending is the first write of its turn's commands, and asks for
// Committed; another entry of the turn is pending (approved while the
// handler ran), so the turn cannot be Committed, and it moves to Executing
// rather than staying Planned — a Planned turn would admit a second plan
// after one of its commands committed.
func testAdvanceFromPlanned(t *testing.T, e *env) {
	is := is.New(t)
	turn := e.turnIn(acme, turnframe.PhasePlanned, at(0))
	other, local := e.freshKey(), e.freshKey()
	e.admit(acme, turn, at(0), command(other, "booking/1"), command(local, "booking/2"))
	w := localCommit(acme, turn, local, "booking/2", e.ids.AttemptID(at(time.Second)), turnframe.AttemptID{}, at(time.Second))
	w.Advance = turnframe.PhaseCommitted
	a := e.apply(w)
	is.Equal(a.Settled[0].Status, turnframe.JournalCommitted) // the local settlement landed
	is.Equal(a.Phase, turnframe.PhaseExecuting)               // not Committed: another entry is pending; not Planned either
	is.Equal(e.phase(acme, turn), turnframe.PhaseExecuting)   // as stored
	_, err := e.s.Apply(e.ctx, turnframe.Write{Account: acme, Turn: turn, Now: at(2 * time.Second), Phase: turnframe.PhasePlanned})
	is.True(errors.Is(err, turnframe.ErrConflict)) // the turn cannot go back to Planned
}
