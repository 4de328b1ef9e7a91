package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// The rules of Write.App (issue 14 point 1): the application's own rows are
// written through the store's Tx in the transaction of the Write, after the
// store's own checks and before the commit. They commit with the Write or
// not at all: an App error writes nothing of the Write, and a refused Write
// never keeps them.

// AppStore is a Store whose test also writes and reads the application's
// own rows through a turnframe.Tx: only a store's own test knows how its Tx
// holds them (a table on the *sql.Tx, a key/value area). The store open
// returns must be one for the suite's App subtests, which fail otherwise.
type AppStore interface {
	turnframe.Store
	// PutAppRow writes the app row key = value within tx, the Tx an Apply
	// handed Write.App. An error is the store's, and is returned as is.
	PutAppRow(ctx context.Context, tx turnframe.Tx, key, value string) error
	// AppRows returns every app row committed so far, by key.
	AppRows(ctx context.Context) (map[string]string, error)
}

func appTests() []test {
	return []test{
		{"AppRowsCommitWithTheWriteAndAreReadAfterwards", testAppCommits},
		{"AppRunsOnceAfterTheChecksAndBeforeTheCommit", testAppOnce},
		{"AnAppErrorWritesNothingOfTheWriteAndIsReturnedWrapped", testAppError},
		{"ARefusedWriteNeverKeepsAppRows", testAppRefused},
		{"AWriteWithoutAppWritesNoAppRows", testAppAbsent},
	}
}

// appStore returns env's store as an AppStore, or fails the test.
func (e *env) appStore() AppStore {
	e.t.Helper()
	s, ok := e.s.(AppStore)
	if !ok {
		e.t.Fatalf("storetest: the store open returns (%T) is not a storetest.AppStore", e.s)
	}
	return s
}

// appRows reads the committed app rows, which must succeed.
func (e *env) appRows() map[string]string {
	e.t.Helper()
	rows, err := e.appStore().AppRows(e.ctx)
	if err != nil {
		e.t.Fatalf("app rows: %v", err)
	}
	return rows
}

// putRows returns an App that writes rows and then returns err, and the
// number of times it was called.
func (e *env) putRows(err error, rows ...string) (turnframe.AppWrites, *int) {
	s := e.appStore()
	calls := new(int)
	return func(ctx context.Context, tx turnframe.Tx) error {
		*calls++
		for _, k := range rows {
			if perr := s.PutAppRow(ctx, tx, k, "v-"+k); perr != nil {
				return perr
			}
		}
		return err
	}, calls
}

func testAppCommits(t *testing.T, e *env) {
	is := is.New(t)
	turn, key, attempt := e.running(acme, "booking/1", at(0))
	w := commitWrite(acme, turn, key, attempt, at(time.Second), []turnframe.Event{{Case: "booking/1", Type: "booked"}}, []turnframe.OutboxMessage{message("")})
	w.App, _ = e.putRows(nil, "seat/4A", "seat/4B")

	a := e.apply(w)
	is.Equal(a.Settled[0].Status, turnframe.JournalCommitted)                                // the commit landed
	is.Equal(len(a.Events), 1)                                                               // with its event
	is.Equal(len(a.Outbox), 1)                                                               // and its outbox row
	is.Equal(e.appRows(), map[string]string{"seat/4A": "v-seat/4A", "seat/4B": "v-seat/4B"}) // and the app's rows, read afterwards

	// A later Write's rows join them.
	turn2, key2, attempt2 := e.running(acme, "booking/2", at(2*time.Second))
	w2 := commitWrite(acme, turn2, key2, attempt2, at(3*time.Second), nil, nil)
	w2.App, _ = e.putRows(nil, "seat/5A")
	e.apply(w2)
	is.Equal(len(e.appRows()), 3) // both commits' rows
}

func testAppOnce(t *testing.T, e *env) {
	is := is.New(t)
	turn, key, attempt := e.running(acme, "booking/1", at(0))
	w := commitWrite(acme, turn, key, attempt, at(time.Second), nil, nil)
	app, calls := e.putRows(nil, "seat/4A")
	var backend string
	w.App = func(ctx context.Context, tx turnframe.Tx) error {
		if tx != nil {
			backend = tx.Backend()
		}
		return app(ctx, tx)
	}
	a := e.apply(w)
	is.Equal(*calls, 1)                                              // called once
	is.True(backend != "")                                           // with the store's transaction, which names its kind
	is.Equal(a.Settled[0].Status, turnframe.JournalCommitted)        // the commit landed
	is.Equal(e.entry(acme, key).Status, turnframe.JournalCommitted)  // as stored
	is.Equal(e.appRows(), map[string]string{"seat/4A": "v-seat/4A"}) // with the row
}

func testAppError(t *testing.T, e *env) {
	is := is.New(t)
	turn, key, attempt := e.running(acme, "booking/1", at(0))
	e.commitEvents(acme, "booking/0", 1, at(0)) // an earlier commit, which must stay as it is
	w := commitWrite(acme, turn, key, attempt, at(time.Second), []turnframe.Event{{Case: "booking/1", Type: "booked"}}, []turnframe.OutboxMessage{message("")})
	w.Advance = turnframe.PhaseCommitted
	errSoldOut := errors.New("seat sold out")
	var calls *int
	w.App, calls = e.putRows(errSoldOut, "seat/4A")

	e.note(w)
	before := e.snapshot()
	_, err := e.s.Apply(e.ctx, w)
	is.True(errors.Is(err, turnframe.ErrAppWrite))                  // the app's writes failed
	is.True(errors.Is(err, errSoldOut))                             // and the app's own error is there
	is.True(!errors.Is(err, turnframe.ErrConflict))                 // and nothing else
	is.Equal(*calls, 1)                                             // the app ran
	e.unchanged(before, "an App error")                             // no journal move, event, outbox row or phase move
	is.Equal(len(e.appRows()), 0)                                   // and no app row
	is.Equal(e.entry(acme, key).Status, turnframe.JournalExecuting) // the attempt still holds the entry

	// The same commit, without the error, then lands.
	w.App, _ = e.putRows(nil, "seat/4A")
	a := e.apply(w)
	is.Equal(a.Settled[0].Status, turnframe.JournalCommitted)        // committed
	is.Equal(e.appRows(), map[string]string{"seat/4A": "v-seat/4A"}) // with its row
}

func testAppRefused(t *testing.T, e *env) {
	tests := []struct {
		name  string
		write func(e *env) turnframe.Write
		want  error
	}{
		{"AMovedCaseRevision", func(e *env) turnframe.Write {
			turn, key, attempt := e.running(acme, "booking/1", at(0))
			e.commitEvents(acme, "booking/1", 1, at(0)) // the case moves
			w := commitWrite(acme, turn, key, attempt, at(time.Second), []turnframe.Event{{Case: "booking/1", Type: "booked"}}, nil)
			w.Expect = map[turnframe.CaseKey]turnframe.CaseRevision{"booking/1": 0}
			return w
		}, turnframe.ErrConflict},
		{"ASupersededAttempt", func(e *env) turnframe.Write {
			turn, key, _ := e.running(acme, "booking/1", at(0))
			return commitWrite(acme, turn, key, e.ids.AttemptID(at(0)), at(time.Second), nil, []turnframe.OutboxMessage{message("")})
		}, turnframe.ErrConflict},
		{"ATurnOfAnotherAccount", func(e *env) turnframe.Write {
			turn, key, attempt := e.running(acme, "booking/1", at(0))
			return commitWrite(globex, turn, key, attempt, at(time.Second), nil, nil)
		}, turnframe.ErrNotFound},
		{"AnInvalidWrite", func(e *env) turnframe.Write {
			turn, key, attempt := e.running(acme, "booking/1", at(0))
			return commitWrite(acme, turn, key, attempt, time.Time{}, nil, nil)
		}, turnframe.ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			e := newEnv(t, e.open)
			w := tc.write(e)
			var calls *int
			w.App, calls = e.putRows(nil, "seat/4A")
			e.refused(w, tc.want, tc.name)
			is.Equal(len(e.appRows()), 0) // no app row
			is.Equal(*calls, 0)           // the app never ran
		})
	}
}

func testAppAbsent(t *testing.T, e *env) {
	is := is.New(t)
	e.appStore() // the store can hold app rows
	turn, key, attempt := e.running(acme, "booking/1", at(0))
	a := e.commit(acme, turn, key, attempt, at(time.Second), []turnframe.Event{{Case: "booking/1", Type: "booked"}}, []turnframe.OutboxMessage{message("")})
	is.Equal(a.Settled[0].Status, turnframe.JournalCommitted) // committed as ever
	is.Equal(len(a.Outbox), 1)                                // with its row
	is.Equal(len(e.appRows()), 0)                             // and no app row
}
