package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

// The demo's RegenerateResponse "answers from the events the turn
// committed", trusting ActionRegenerateResponse's doc ("every command
// settled"). Recovery now also hands it a turn whose command's outcome is
// unknown (cecbd19: answered around unknowns the policy left): the demo
// tells the user "Nothing changed on your booking." about a booking whose
// handler may have made it — not that it is being verified.
func TestTheDemosAnswerAroundAnUnknownDoesNotSayNothingChanged(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	store, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "app.db"))
	is.NoErr(err)
	defer store.Close()
	rt := turnframe.New(store)
	turn, err := rt.Receive(ctx, fixtureAccount, rt.NewConversationID(), "add breakfast to my booking")
	is.NoErr(err)
	_, err = rt.Plan(ctx, fixtureAccount, turn, turnframe.Plan{Commands: []turnframe.Command{{
		Key: "key-breakfast", Case: "booking/1", Name: "add-breakfast", Payload: []byte(`{"item":"breakfast","cents":1500}`)}}})
	is.NoErr(err)
	_, err = rt.Execute(ctx, fixtureAccount, turn, turnframe.HandlerFunc(func(context.Context, turnframe.Call) turnframe.Outcome {
		return turnframe.Unknown("") // the booking system did not answer in time: it may have added it
	}))
	is.NoErr(err)
	// The process dies here, before Deliver.
	var out strings.Builder
	d := &demo{w: &out, clock: newDemoClock(), byTurn: map[turnframe.TurnID]*effect{turn: {n: 1}}}
	d.start = d.clock.Now()
	p := &process{store: store, rt: rt, rec: turnframe.NewRecovery(store)}
	rep, err := p.rec.Recover(ctx, turnframe.RecoveryScope{}, &demoRecovery{d: d, p: p})
	is.NoErr(err)
	t.Log(out.String())
	is.Equal(len(rep.Turns.Failures), 0)
	is.True(strings.Contains(out.String(), "assistant:"))                        // recovery had the demo answer the turn
	is.True(!strings.Contains(out.String(), "Nothing changed on your booking.")) // but not that nothing happened
}
