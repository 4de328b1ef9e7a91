package turnframe_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/turnframe/turnframe"
)

// A Verifier that found the effect but answers a reference longer than any
// store keeps: the reference is dropped and the row settles completed. Kept,
// the settlement would be refused as invalid and the row would stay unknown
// at every pass, a found effect never settled.
func TestAFoundEffectWithAnOverlongReferenceStillSettles(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		row := polUnknownRow(t, store, "k1", "payments")
		remote := turnframe.Remote{Verifier: polFound(turnframe.FoundHappened, strings.Repeat("r", turnframe.MaxRemoteRefLen+1))}
		rec := turnframe.NewRecovery(store, turnframe.WithClock(newPolClock(dispNow.Add(time.Minute)).Now), turnframe.WithDestination("payments", remote))
		report, err := rec.Recover(ctx, turnframe.RecoveryScope{}, polNoTurns{t})
		is.NoErr(err)
		is.Equal(len(report.Policy), 1)
		is.NoErr(report.Policy[0].Err)
		is.Equal(report.Policy[0].Outcome, turnframe.PolicyCompleted)
		got := dispGet(t, store, row.ID)
		is.Equal(got.Status, turnframe.OutboxCompleted) // settled by the finding
		is.Equal(got.RemoteRef, "")                     // without the reference no store keeps
	})
}

// The first finding past the last one a Verifier can answer is out of
// range like any other: one more lookup that could not tell, and its note
// says which finding came back.
func TestTheFirstFindingOutOfRangeIsNamedInTheTrail(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		row := polUnknownRow(t, store, "k1", "payments")
		remote := turnframe.Remote{Verifier: polFound(turnframe.FoundNotHappened+1, "")}
		rec := turnframe.NewRecovery(store, turnframe.WithClock(newPolClock(dispNow.Add(time.Minute)).Now), turnframe.WithDestination("payments", remote))
		report, err := rec.Recover(ctx, turnframe.RecoveryScope{}, polNoTurns{t})
		is.NoErr(err)
		is.Equal(report.Policy[0].Outcome, turnframe.PolicyUnsure)
		last := polLast(t, store, turnframe.OutboxSubject(rtAccount, row.ID))
		is.Equal(last.Code, turnframe.CodeVerifyUnsure)
		is.True(strings.Contains(last.Note, "finding 3")) // the trail names the answer out of range
	})
}

// panicTurns is a RecoveryHandler whose ResumeCommands panics.
type panicTurns struct{ polNoTurns }

func (panicTurns) ResumeCommands(context.Context, turnframe.TurnPhaseMarker, turnframe.RecoveryAction) error {
	panic("handler bug")
}

// A recovery handler that panics fails its turn: the panic is recovered,
// the pass goes on, and the turn is listed as a failure naming the panic,
// never counted as recovered.
func TestARecoveryHandlerThatPanicsFailsItsTurn(t *testing.T) {
	is := is.New(t)
	store := memstoreFor(t)
	rt := turnframe.New(store)
	turn := rtPlanned(t, rt, rtAccount, rtCmd("k1", "booking/1", "book"))
	report, err := turnframe.NewRecovery(store).Recover(context.Background(), turnframe.RecoveryScope{}, panicTurns{polNoTurns{t}})
	is.NoErr(err)
	is.Equal(len(report.Turns.Failures), 1) // the turn failed
	f := report.Turns.Failures[0]
	is.Equal(f.Turn, turn)
	is.Equal(f.Action, turnframe.ActionResumeCommands)
	is.True(f.Err != nil && strings.Contains(f.Err.Error(), "handler bug")) // naming the panic
}

// AnswerBasis.UnmarshalText reads back what MarshalText writes and nothing
// else: "answer basis(1)" is not how basis 1 is written.
func TestAnAnswerBasisReadsBackOnlyWhatItsMarshalWrites(t *testing.T) {
	is := is.New(t)
	for _, b := range []turnframe.AnswerBasis{turnframe.BasisCurrentCommittedState, turnframe.BasisGeneralDomainKnowledge, 7} {
		text, err := b.MarshalText()
		is.NoErr(err)
		var got turnframe.AnswerBasis
		is.NoErr(got.UnmarshalText(text))
		is.Equal(got, b) // read back
	}
	var got turnframe.AnswerBasis
	err := got.UnmarshalText([]byte("answer basis(1)"))
	is.True(err != nil) // basis 1 is written committed_state_after_turn
}

// evidenceRefused is a store whose RecordEvidence fails.
type evidenceRefused struct{ turnframe.Store }

func (evidenceRefused) RecordEvidence(context.Context, turnframe.HistoryRecord) error {
	return errors.New("disk full")
}

// A lookup that could not tell counts only once it is recorded: when the
// record is refused, the pass reports the error and moves nothing, and the
// next Recover asks again. Counted unrecorded, the last try allowed would
// escalate an unknown whose trail shows no lookup at all.
func TestAnUnrecordedLookupIsNotCounted(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		row := polUnknownRow(t, store, "k1", "payments")
		remote := turnframe.Remote{VerifyTries: 1, Verifier: polFound(turnframe.FoundUnsure, "")}
		rec := turnframe.NewRecovery(evidenceRefused{store}, turnframe.WithClock(newPolClock(dispNow.Add(time.Minute)).Now), turnframe.WithDestination("payments", remote))
		report, err := rec.Recover(ctx, turnframe.RecoveryScope{}, polNoTurns{t})
		is.NoErr(err)
		is.Equal(len(report.Policy), 1)
		is.True(report.Policy[0].Err != nil)                                       // the refused record is reported
		is.True(report.Policy[0].Outcome != turnframe.PolicyEscalated)             // not escalated on a lookup nobody recorded
		is.Equal(dispGet(t, store, row.ID).Status, turnframe.OutboxOutcomeUnknown) // left for the next Recover
	})
}
