package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

func lifecycleTests() []test {
	return []test{
		{"AClosedStoreReturnsErrClosed", testClosed},
		{"WriteInputsAreCopiedIn", testCopiedIn},
		{"ReturnedValuesAreCopiesOut", testCopiedOut},
	}
}

func testClosed(t *testing.T, e *env) {
	turn, key, attempt := e.running(acme, "booking/1", at(0))
	e.commit(acme, turn, key, attempt, at(0), nil, []turnframe.OutboxMessage{message("")})
	c := e.claimOne(at(time.Second), worker)
	if err := e.s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	ctx, s := e.ctx, e.s
	calls := map[string]func() error{
		"Apply": func() error {
			_, err := s.Apply(ctx, turnframe.Write{Account: acme, Turn: turn, Now: at(time.Hour), Phase: turnframe.PhaseAbandoned})
			return err
		},
		"TurnPhase": func() error { _, err := s.TurnPhase(ctx, acme, turn); return err },
		"LoadTurn":  func() error { _, err := s.LoadTurn(ctx, acme, turn); return err },
		"ListUnfinishedTurns": func() error {
			_, err := s.ListUnfinishedTurns(ctx, turnframe.RecoveryScope{}, 10)
			return err
		},
		"ForTurn":      func() error { _, err := s.ForTurn(ctx, acme, turn); return err },
		"ByKey":        func() error { _, err := s.ByKey(ctx, acme, key); return err },
		"EventsByID":   func() error { _, err := s.EventsByID(ctx, acme, nil); return err },
		"EventsSince":  func() error { _, err := s.EventsSince(ctx, acme, "booking/1", 0, 10); return err },
		"CaseRevision": func() error { _, err := s.CaseRevision(ctx, acme, "booking/1"); return err },
		"Replay":       func() error { _, err := s.Replay(ctx, acme, turn); return err },
		"ClaimDue":     func() error { _, err := s.ClaimDue(ctx, at(time.Hour), 10, worker, lease); return err },
		"Complete":     func() error { return turnframe.CompleteClaim(ctx, s, c, "", at(time.Hour)) },
		"Retry":        func() error { return turnframe.RetryClaim(ctx, s, c, "busy", at(time.Hour)) },
		"Fail":         func() error { return turnframe.FailClaim(ctx, s, c, "no", at(time.Hour)) },
		"MarkUnknown":  func() error { return turnframe.MarkClaimUnknown(ctx, s, c, "", at(time.Hour)) },
		"Settle": func() error {
			_, err := s.Settle(ctx, []turnframe.OutboxSettlement{{Claim: c, To: turnframe.OutboxCompleted, Now: at(time.Hour)}})
			return err
		},
		"Resolve": func() error {
			return s.Resolve(ctx, turnframe.Resolution{ID: c.ID, Verdict: turnframe.VerdictCompleted, Now: at(time.Hour)})
		},
		"SettleNothing": func() error { _, err := s.Settle(ctx, nil); return err }, // an empty batch is valid input too
		"ExtendNothing": func() error { _, err := s.ExtendClaims(ctx, nil, at(time.Hour), lease); return err },
		"Requeue":       func() error { return s.Requeue(ctx, c.ID, 0, at(time.Hour)) },
		"ExpireClaims":  func() error { _, err := s.ExpireClaims(ctx, at(time.Hour)); return err },
		"ReleaseClaim":  func() error { return s.ReleaseClaim(ctx, c.ID, 0, at(time.Hour)) },
		"History": func() error {
			_, err := s.History(ctx, turnframe.TurnSubject(acme, turn), 0, 10)
			return err
		},
		"RecordEvidence": func() error {
			return s.RecordEvidence(ctx, turnframe.NewEvidence(turnframe.TurnSubject(acme, turn), "", turnframe.ActorOperator, "", "", "looked", at(time.Hour)))
		},
		"ExtendClaims": func() error {
			_, err := s.ExtendClaims(ctx, []turnframe.Claim{c}, at(time.Hour), lease)
			return err
		},
		"GetOutbox":  func() error { _, err := s.GetOutbox(ctx, c.ID); return err },
		"ListOutbox": func() error { _, err := s.ListOutbox(ctx, turnframe.OutboxFilter{Limit: 10}); return err },
		"Prune":      func() error { _, err := s.Prune(ctx, at(time.Hour)); return err },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, turnframe.ErrClosed) {
			t.Errorf("%s after Close: got error %v, want ErrClosed", name, err)
		}
	}
}

func testCopiedIn(t *testing.T, e *env) {
	is := is.New(t)
	turn := e.begin(acme, at(0))
	key := e.freshKey()
	cmd := command(key, "booking/1")
	replay := &turnframe.ReplayRecord{
		Understanding: &turnframe.Understanding{Questions: []turnframe.UnderstoodQuestion{{Unit: 1, Words: turnframe.WordRange{End: 4}}}},
		LoadedCases:   []turnframe.CaseKey{"booking/1"},
	}
	attempt := e.ids.AttemptID(at(0))
	e.apply(turnframe.Write{Account: acme, Turn: turn, Now: at(0), Admit: []turnframe.Command{cmd}, Replay: replay,
		Settle: []turnframe.Settlement{take(key, attempt, turnframe.AttemptID{})}})
	events := []turnframe.Event{{Case: "booking/1", Type: "booked", Data: []byte("event")}}
	outbox := []turnframe.OutboxMessage{{Destination: "payments", Payload: []byte("payload")}}
	a := e.commit(acme, turn, key, attempt, at(time.Second), events, outbox)

	// The caller reuses every buffer it passed.
	cmd.Payload[0] = 'X'
	replay.Understanding.Questions[0].Unit = 99
	replay.LoadedCases[0] = "changed"
	events[0].Data[0] = 'X'
	outbox[0].Payload[0] = 'X'

	is.Equal(string(e.entry(acme, key).Payload), `{"seats":2}`) // command payload
	got, err := e.s.Replay(e.ctx, acme, turn)
	is.NoErr(err)                                               // replay
	is.Equal(got.Understanding.Questions[0].Unit, 1)            // understanding
	is.Equal(got.LoadedCases, []turnframe.CaseKey{"booking/1"}) // loaded cases
	evs, err := e.s.EventsSince(e.ctx, acme, "booking/1", 0, 10)
	is.NoErr(err)                                              // events
	is.Equal(string(evs[0].Data), "event")                     // event data
	is.Equal(string(e.row(a.Outbox[0].ID).Payload), "payload") // outbox payload
}

func testCopiedOut(t *testing.T, e *env) {
	is := is.New(t)
	turn := e.begin(acme, at(0))
	key := e.freshKey()
	e.apply(turnframe.Write{Account: acme, Turn: turn, Now: at(0), Admit: []turnframe.Command{command(key, "booking/1")},
		Replay: &turnframe.ReplayRecord{
			Understanding: &turnframe.Understanding{Questions: []turnframe.UnderstoodQuestion{{Unit: 1}}},
			LoadedCases:   []turnframe.CaseKey{"booking/1"},
		}})
	attempt := e.execute(acme, turn, key, at(0))
	a := e.commit(acme, turn, key, attempt, at(time.Second),
		[]turnframe.Event{{Case: "booking/1", Type: "booked", Data: []byte("event")}},
		[]turnframe.OutboxMessage{{Destination: "payments", Payload: []byte("payload")}})
	eventID := a.Events[0].ID

	// Mutate everything the store handed out.
	a.Settled[0].Payload[0] = 'X'
	a.Settled[0].EventIDs[0] = turnframe.EventID{}
	a.Events[0].Data[0] = 'X'
	a.Outbox[0].Payload[0] = 'X'
	byKey := e.entry(acme, key)
	byKey.Payload[0] = 'X'
	byKey.EventIDs[0] = turnframe.EventID{}
	es, err := e.s.ForTurn(e.ctx, acme, turn)
	is.NoErr(err) // for turn
	es[0].Payload[0] = 'X'
	es[0].EventIDs[0] = turnframe.EventID{}
	evs, err := e.s.EventsByID(e.ctx, acme, []turnframe.EventID{eventID})
	is.NoErr(err) // events by id
	evs[0].Data[0] = 'X'
	since, err := e.s.EventsSince(e.ctx, acme, "booking/1", 0, 10)
	is.NoErr(err) // events since
	since[0].Data[0] = 'X'
	replay, err := e.s.Replay(e.ctx, acme, turn)
	is.NoErr(err) // replay
	replay.Understanding.Questions[0].Unit = 99
	replay.LoadedCases[0] = "changed"
	row := e.row(a.Outbox[0].ID)
	row.Payload[0] = 'X'
	rows, err := e.s.ListOutbox(e.ctx, turnframe.OutboxFilter{Limit: 10})
	is.NoErr(err) // list outbox
	rows[0].Payload[0] = 'X'
	c := e.claimOne(at(2*time.Second), worker)
	c.Payload[0] = 'X'

	// Read everything again.
	entry := e.entry(acme, key)
	is.Equal(string(entry.Payload), `{"seats":2}`)         // entry payload
	is.Equal(entry.EventIDs, []turnframe.EventID{eventID}) // entry event ids
	es, err = e.s.ForTurn(e.ctx, acme, turn)
	is.NoErr(err)                                  // for turn
	is.Equal(string(es[0].Payload), `{"seats":2}`) // entry payload via the turn
	evs, err = e.s.EventsByID(e.ctx, acme, []turnframe.EventID{eventID})
	is.NoErr(err)                          // events by id
	is.Equal(string(evs[0].Data), "event") // event data
	replay, err = e.s.Replay(e.ctx, acme, turn)
	is.NoErr(err)                                                           // replay
	is.Equal(replay.Understanding.Questions[0].Unit, 1)                     // understanding
	is.Equal(replay.LoadedCases, []turnframe.CaseKey{"booking/1"})          // loaded cases
	is.Equal(string(e.row(a.Outbox[0].ID).Payload), "payload")              // outbox payload
	is.NoErr(turnframe.CompleteClaim(e.ctx, e.s, c, "", at(2*time.Second))) // the claim is still the claim
}
