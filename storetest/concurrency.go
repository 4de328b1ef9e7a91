package storetest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// Writers at once. A store whose database runs writers concurrently must
// arbitrate them as one writer after the other would: these rules hold
// trivially for a store with one writer, and are where a store with many
// (PostgreSQL at READ COMMITTED) must lock what its rules read.

func concurrencyTests() []test {
	return []test{
		{"AKeyManyTurnsAdmitAtOnceIsAdmittedOnceAndIsTheFirstTurnsForAll", testAdmitAtOnce},
		{"EventsManyCommitsAppendToOneCaseAtOnceGetConsecutiveRevisions", testEventsAtOnce},
		{"AnExpectationManyWritersMeetAtOnceLetsExactlyOneLand", testExpectAtOnce},
	}
}

// writers is how many Writes each rule applies at once.
const writers = 6

// applyAtOnce applies writes from a goroutine each, released together, and
// returns what each got.
func (e *env) applyAtOnce(writes []turnframe.Write) ([]turnframe.Applied, []error) {
	applied, errs := make([]turnframe.Applied, len(writes)), make([]error, len(writes))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, w := range writes {
		e.note(w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			applied[i], errs[i] = e.s.Apply(e.ctx, w)
		}()
	}
	close(start)
	wg.Wait()
	return applied, errs
}

func testAdmitAtOnce(t *testing.T, e *env) {
	is := is.New(t)
	key := e.freshKey()
	writes := make([]turnframe.Write, writers)
	for i := range writes {
		writes[i] = e.beginWrite(acme, at(time.Duration(i)*time.Millisecond))
		writes[i].Admit = []turnframe.Command{command(key, "booking/1")}
	}
	applied, errs := e.applyAtOnce(writes)
	first := -1
	for i, err := range errs {
		is.NoErr(err) // every writer lands
		if applied[i].Earlier[0].Key == "" {
			is.Equal(first, -1) // only one writer admits the key
			first = i
		}
	}
	is.True(first >= 0) // one did
	for i := range applied {
		is.Equal(applied[i].Admitted[0].Turn, writes[first].Turn) // the entry is that writer's turn's, for every writer
	}
	entry := e.entry(acme, key)
	is.Equal(entry.Turn, writes[first].Turn) // and so it is stored
}

func testEventsAtOnce(t *testing.T, e *env) {
	is := is.New(t)
	const c turnframe.CaseKey = "booking/1"
	writes := make([]turnframe.Write, writers)
	for i := range writes {
		turn, key, attempt := e.running(acme, c, at(0))
		writes[i] = commitWrite(acme, turn, key, attempt, at(time.Second), []turnframe.Event{
			{Case: c, Type: "booked"}, {Case: c, Type: "paid"}}, nil)
	}
	_, errs := e.applyAtOnce(writes)
	for _, err := range errs {
		is.NoErr(err) // every commit lands
	}
	events, err := e.s.EventsSince(e.ctx, acme, c, 0, turnframe.MaxLimit)
	is.NoErr(err)                        // events
	is.Equal(len(events), 2*len(writes)) // every one
	for i, ev := range events {
		is.Equal(ev.Revision, turnframe.CaseRevision(i+1)) // consecutive revisions, none lost or doubled
		if i%2 == 1 {
			is.Equal(events[i-1].Key, ev.Key) // one commit's events stay together
		}
	}
}

func testExpectAtOnce(t *testing.T, e *env) {
	is := is.New(t)
	const c turnframe.CaseKey = "seat/4A"
	writes := make([]turnframe.Write, writers)
	for i := range writes {
		turn, key, attempt := e.running(acme, c, at(0))
		writes[i] = commitWrite(acme, turn, key, attempt, at(time.Second), []turnframe.Event{{Case: c, Type: "booked"}}, nil)
		writes[i].Expect = map[turnframe.CaseKey]turnframe.CaseRevision{c: 0}
	}
	_, errs := e.applyAtOnce(writes)
	landed := 0
	for _, err := range errs {
		switch {
		case err == nil:
			landed++
		case !errors.Is(err, turnframe.ErrConflict):
			t.Fatalf("a writer got %v, want nil or ErrConflict", err)
		}
	}
	is.Equal(landed, 1) // one booking of the seat
	rev, err := e.s.CaseRevision(e.ctx, acme, c)
	is.NoErr(err)                            // revision
	is.Equal(rev, turnframe.CaseRevision(1)) // one event
}
