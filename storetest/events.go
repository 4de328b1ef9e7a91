package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

func eventTests() []test {
	return []test{
		{"RevisionsIncrementByOnePerCase", testRevisionsPerCase},
		{"EventsCarryTheirTurnKeyAndTime", testEventFields},
		{"ExpectWithAMovedRevisionIsConflictAndWritesNothing", testExpectMoved},
		{"ExpectWithTheCurrentRevisionWrites", testExpectCurrent},
		{"AnEventForAnotherCaseThanItsCommandIsInvalid", testEventOtherCase},
		{"EventsSinceReturnsLaterRevisionsInOrderUpToLimit", testEventsSince},
		{"EventsByIDReturnsAppendOrderAndSkipsUnknownIDs", testEventsByID},
		{"CaseRevisionIsZeroForACaseWithoutEvents", testRevisionZero},
	}
}

// commitEvents runs one command on c that appends n events, and returns them.
func (e *env) commitEvents(account turnframe.AccountID, c turnframe.CaseKey, n int, now time.Time) []turnframe.StoredEvent {
	e.t.Helper()
	turn, key, attempt := e.running(account, c, now)
	evs := make([]turnframe.Event, n)
	for i := range evs {
		evs[i] = turnframe.Event{Case: c, Type: "changed", Data: []byte{byte(i)}}
	}
	return e.commit(account, turn, key, attempt, now, evs, nil).Events
}

func revisions(evs []turnframe.StoredEvent) []turnframe.CaseRevision {
	var revs []turnframe.CaseRevision
	for _, ev := range evs {
		revs = append(revs, ev.Revision)
	}
	return revs
}

func testRevisionsPerCase(t *testing.T, e *env) {
	is := is.New(t)
	is.Equal(revisions(e.commitEvents(acme, "a", 2, at(0))), []turnframe.CaseRevision{1, 2})                // first command on a
	is.Equal(revisions(e.commitEvents(acme, "b", 1, at(time.Second))), []turnframe.CaseRevision{1})         // b counts on its own
	is.Equal(revisions(e.commitEvents(acme, "a", 3, at(2*time.Second))), []turnframe.CaseRevision{3, 4, 5}) // a goes on
	is.Equal(revisions(e.commitEvents(globex, "a", 1, at(3*time.Second))), []turnframe.CaseRevision{1})     // another account's a is another case
	for c, want := range map[turnframe.CaseKey]turnframe.CaseRevision{"a": 5, "b": 1} {
		rev, err := e.s.CaseRevision(e.ctx, acme, c)
		is.NoErr(err)       // case revision
		is.Equal(rev, want) // the last revision
	}
}

func testEventFields(t *testing.T, e *env) {
	is := is.New(t)
	turn, key, attempt := e.running(acme, "booking/1", at(0))
	a := e.commit(acme, turn, key, attempt, at(time.Second), []turnframe.Event{{Case: "booking/1", Type: "booked", Data: []byte(`{"seat":"4A"}`)}}, nil)
	got, err := e.s.EventsSince(e.ctx, acme, "booking/1", 0, 10)
	is.NoErr(err)                      // events since
	is.True(sameEvents(got, a.Events)) // stored as applied
	ev := got[0]
	is.True(!ev.ID.IsZero())                          // an id
	is.Equal(ev.Account, acme)                        // account
	is.Equal(ev.Turn, turn)                           // turn
	is.Equal(ev.Key, key)                             // the committing command
	is.Equal(ev.Case, turnframe.CaseKey("booking/1")) // case
	is.Equal(ev.Type, "booked")                       // type
	is.Equal(string(ev.Data), `{"seat":"4A"}`)        // data
	is.Equal(ev.Revision, turnframe.CaseRevision(1))  // revision
	is.True(ev.At.Equal(at(time.Second)))             // the write's time
}

func testExpectMoved(t *testing.T, e *env) {
	is := is.New(t)
	e.commitEvents(acme, "booking/1", 2, at(0))
	turn, key, attempt := e.running(acme, "booking/1", at(time.Second))
	for _, stale := range []turnframe.CaseRevision{0, 1, 3} {
		w := commitWrite(acme, turn, key, attempt, at(2*time.Second), []turnframe.Event{{Case: "booking/1", Type: "booked"}},
			[]turnframe.OutboxMessage{message("")})
		w.Expect = map[turnframe.CaseKey]turnframe.CaseRevision{"booking/1": stale}
		e.refused(w, turnframe.ErrConflict, "expect a moved revision")
	}
	// A case the write does not touch is checked too.
	w := commitWrite(acme, turn, key, attempt, at(2*time.Second), []turnframe.Event{{Case: "booking/1", Type: "booked"}}, nil)
	w.Expect = map[turnframe.CaseKey]turnframe.CaseRevision{"booking/1": 2, "other": 1}
	e.refused(w, turnframe.ErrConflict, "expect a moved revision of another case")
	is.Equal(e.entry(acme, key).Status, turnframe.JournalExecuting) // still running
}

func testExpectCurrent(t *testing.T, e *env) {
	is := is.New(t)
	e.commitEvents(acme, "booking/1", 2, at(0))
	turn, key, attempt := e.running(acme, "booking/1", at(time.Second))
	w := commitWrite(acme, turn, key, attempt, at(2*time.Second), []turnframe.Event{{Case: "booking/1", Type: "booked"}}, nil)
	w.Expect = map[turnframe.CaseKey]turnframe.CaseRevision{"booking/1": 2, "untouched": 0}
	a := e.apply(w)
	is.Equal(a.Events[0].Revision, turnframe.CaseRevision(3)) // appended after the expected revision
}

func testEventOtherCase(t *testing.T, e *env) {
	is := is.New(t)
	turn, key, attempt := e.running(acme, "booking/1", at(0))
	w := commitWrite(acme, turn, key, attempt, at(time.Second), []turnframe.Event{{Case: "booking/2", Type: "booked"}}, nil)
	e.note(w)
	before := e.snapshot()
	_, err := e.s.Apply(e.ctx, w)
	is.True(errors.Is(err, turnframe.ErrInvalid)) // an event of another case
	e.unchanged(before, "event of another case")
}

func testEventsSince(t *testing.T, e *env) {
	is := is.New(t)
	all := e.commitEvents(acme, "booking/1", 5, at(0))
	got, err := e.s.EventsSince(e.ctx, acme, "booking/1", 2, 2)
	is.NoErr(err)                                            // events since
	is.Equal(revisions(got), []turnframe.CaseRevision{3, 4}) // above since, limited
	is.True(sameEvents(got, all[2:4]))                       // the same events
	got, err = e.s.EventsSince(e.ctx, acme, "booking/1", 0, 100)
	is.NoErr(err)                                                     // events since
	is.Equal(revisions(got), []turnframe.CaseRevision{1, 2, 3, 4, 5}) // all, in order
	got, err = e.s.EventsSince(e.ctx, acme, "booking/1", 5, 100)
	is.NoErr(err)         // events since
	is.Equal(len(got), 0) // nothing after the last
	got, err = e.s.EventsSince(e.ctx, acme, "never", 0, 100)
	is.NoErr(err)         // events since
	is.Equal(len(got), 0) // a case without events
}

func testEventsByID(t *testing.T, e *env) {
	is := is.New(t)
	first := e.commitEvents(acme, "a", 2, at(0))
	second := e.commitEvents(acme, "b", 1, at(time.Second))
	missing := e.ids.EventID(at(time.Second))
	got, err := e.s.EventsByID(e.ctx, acme, []turnframe.EventID{second[0].ID, missing, first[1].ID, first[0].ID})
	is.NoErr(err) // events by id
	want := []turnframe.StoredEvent{first[0], first[1], second[0]}
	is.True(sameEvents(got, want)) // append order, the unknown id absent
	got, err = e.s.EventsByID(e.ctx, acme, nil)
	is.NoErr(err)         // no ids
	is.Equal(len(got), 0) // nothing
}

func testRevisionZero(t *testing.T, e *env) {
	is := is.New(t)
	rev, err := e.s.CaseRevision(e.ctx, acme, "never")
	is.NoErr(err)                            // case revision
	is.Equal(rev, turnframe.CaseRevision(0)) // no events yet
}
