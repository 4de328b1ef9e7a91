package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

func tenancyTests() []test {
	return []test{
		{"AnotherTenantsTurnEntriesEventsAndReplayReadAsNotFoundOrAbsent", testTenantReads},
		{"ApplyAgainstAnotherTenantsTurnIsNotFound", testTenantApply},
		{"KeysAreUniquePerAccountNotAcrossAccounts", testTenantKeys},
	}
}

func testTenantReads(t *testing.T, e *env) {
	is := is.New(t)
	turn, key, attempt := e.running(acme, "booking/1", at(0))
	a := e.commit(acme, turn, key, attempt, at(time.Second), []turnframe.Event{{Case: "booking/1", Type: "booked"}}, []turnframe.OutboxMessage{message("")})
	e.apply(turnframe.Write{Account: acme, Turn: turn, Now: at(time.Second), Replay: &turnframe.ReplayRecord{Response: "booked"}})

	_, err := e.s.LoadTurn(e.ctx, globex, turn)
	is.True(errors.Is(err, turnframe.ErrNotFound)) // load turn
	_, err = e.s.TurnPhase(e.ctx, globex, turn)
	is.True(errors.Is(err, turnframe.ErrNotFound)) // turn phase
	_, err = e.s.Replay(e.ctx, globex, turn)
	is.True(errors.Is(err, turnframe.ErrNotFound)) // replay
	es, err := e.s.ForTurn(e.ctx, globex, turn)
	is.NoErr(err)        // for turn: no error
	is.Equal(len(es), 0) // and no entries
	_, err = e.s.ByKey(e.ctx, globex, key)
	is.True(errors.Is(err, turnframe.ErrNotFound)) // by key
	evs, err := e.s.EventsByID(e.ctx, globex, []turnframe.EventID{a.Events[0].ID})
	is.NoErr(err)         // events by id: no error
	is.Equal(len(evs), 0) // and absent
	evs, err = e.s.EventsSince(e.ctx, globex, "booking/1", 0, 10)
	is.NoErr(err)         // events since
	is.Equal(len(evs), 0) // none
	rev, err := e.s.CaseRevision(e.ctx, globex, "booking/1")
	is.NoErr(err)                            // case revision
	is.Equal(rev, turnframe.CaseRevision(0)) // another account's case has no events
	ts, err := e.s.ListUnfinishedTurns(e.ctx, turnframe.RecoveryScope{Account: globex}, 10)
	is.NoErr(err)        // unfinished
	is.Equal(len(ts), 0) // none of another account
	rs, err := e.s.ListOutbox(e.ctx, turnframe.OutboxFilter{Account: globex, Limit: 10})
	is.NoErr(err)        // list outbox
	is.Equal(len(rs), 0) // none of another account

	// The owner still reads everything.
	_, err = e.s.LoadTurn(e.ctx, acme, turn)
	is.NoErr(err) // the owner's turn
	evs, err = e.s.EventsByID(e.ctx, acme, []turnframe.EventID{a.Events[0].ID})
	is.NoErr(err)         // the owner's events
	is.Equal(len(evs), 1) // present
}

func testTenantApply(t *testing.T, e *env) {
	turn, key, attempt := e.running(acme, "booking/1", at(0))
	writes := map[string]turnframe.Write{
		"admit":  {Account: globex, Turn: turn, Now: at(time.Second), Admit: []turnframe.Command{command(e.freshKey(), "booking/1")}},
		"phase":  {Account: globex, Turn: turn, Now: at(time.Second), Phase: turnframe.PhaseAbandoned},
		"replay": {Account: globex, Turn: turn, Now: at(time.Second), Replay: &turnframe.ReplayRecord{Response: "hijacked"}},
		"settle": {Account: globex, Turn: turn, Now: at(time.Second), Settle: []turnframe.Settlement{{Key: key, To: turnframe.JournalCommitted, Attempt: attempt}}},
		"commit": commitWrite(globex, turn, key, attempt, at(time.Second), []turnframe.Event{{Case: "booking/1", Type: "booked"}}, []turnframe.OutboxMessage{message("")}),
	}
	for what, w := range writes {
		e.refused(w, turnframe.ErrNotFound, what+" on another tenant's turn")
	}
}

func testTenantKeys(t *testing.T, e *env) {
	is := is.New(t)
	ta := e.begin(acme, at(0))
	tg := e.begin(globex, at(0))
	e.admit(acme, ta, at(0), command("k1", "booking/1"))
	other := command("k1", "invoice/7")
	other.Name = "refund"
	a := e.admit(globex, tg, at(0), other)
	is.Equal(a.Admitted[0].Account, globex)                              // a new entry of its own
	is.Equal(a.Admitted[0].Turn, tg)                                     // in its own turn
	is.Equal(e.entry(acme, "k1").Name, "book")                           // acme's command
	is.Equal(e.entry(globex, "k1").Name, "refund")                       // globex's command
	is.Equal(e.entry(globex, "k1").Case, turnframe.CaseKey("invoice/7")) // with its own case
}
