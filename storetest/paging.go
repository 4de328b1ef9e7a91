package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// The rules of OutboxFilter.After (issue 13): ListOutbox pages by enqueue
// order, from the row after the cursor, whatever that row's status; a
// cursor row that does not exist (any more), or that belongs to another
// account than the filter's, is ErrNotFound.

func pagingTests() []test {
	return []test{
		{"ListOutboxAfterACursorPagesThroughEveryMatchingRowOnceInEnqueueOrder", testOutboxPages},
		{"ListOutboxAfterARowThatDoesNotExistIsNotFound", testOutboxPagesMissing},
	}
}

// outboxIDs lists the ids of rows matching f, which must succeed.
func (e *env) outboxIDs(f turnframe.OutboxFilter) []turnframe.OutboxID {
	e.t.Helper()
	rs, err := e.s.ListOutbox(e.ctx, f)
	if err != nil {
		e.t.Fatalf("list outbox %+v: %v", f, err)
	}
	ids := make([]turnframe.OutboxID, len(rs))
	for i, r := range rs {
		ids[i] = r.ID
	}
	return ids
}

func testOutboxPages(t *testing.T, e *env) {
	// Rows of both accounts, in every status a row can be in, enqueued in
	// turn; globex's are not due until tomorrow, so each acme row is the
	// one rowIn claims.
	later := message("")
	later.NotBefore = at(24 * time.Hour)
	var all []turnframe.OutboxID
	for i, status := range []turnframe.OutboxStatus{
		turnframe.OutboxPending, turnframe.OutboxCompleted, turnframe.OutboxNeedsIntervention,
		turnframe.OutboxFailed, turnframe.OutboxOutcomeUnknown, turnframe.OutboxPending,
	} {
		r, _ := e.rowIn(status, i%2 == 0)
		all = append(all, r.ID)
		all = append(all, e.enqueue(globex, at(0), later)[0].ID)
	}
	for _, tc := range []struct {
		name   string
		filter turnframe.OutboxFilter
	}{
		{"Every", turnframe.OutboxFilter{}},
		{"OneAccount", turnframe.OutboxFilter{Account: acme}},
		{"OneStatus", turnframe.OutboxFilter{Status: turnframe.OutboxPending}},
		{"NeedsIntervention", turnframe.OutboxFilter{Status: turnframe.OutboxNeedsIntervention}},
		{"AccountAndStatus", turnframe.OutboxFilter{Account: globex, Status: turnframe.OutboxPending}},
	} {
		for limit := 1; limit <= 3; limit++ {
			t.Run(fmt.Sprintf("%s_limit_%d", tc.name, limit), func(t *testing.T) {
				is := is.New(t)
				f := tc.filter
				f.Limit = turnframe.MaxLimit
				want := e.outboxIDs(f)
				f.Limit = limit
				var got []turnframe.OutboxID
				for page := 0; ; page++ {
					if page > len(all) {
						t.Fatalf("more than %d pages", page)
					}
					ids := e.outboxIDs(f)
					is.True(len(ids) <= limit) // a page at a time
					if len(ids) == 0 {
						break
					}
					got = append(got, ids...)
					f.After = ids[len(ids)-1]
				}
				is.Equal(got, want) // every matching row once, in enqueue order
			})
		}
	}
	t.Run("AfterARowOfAnotherStatus", func(t *testing.T) {
		is := is.New(t)
		got := e.outboxIDs(turnframe.OutboxFilter{Status: turnframe.OutboxPending, After: all[2], Limit: turnframe.MaxLimit}) // all[2] is Completed
		var want []turnframe.OutboxID
		for _, id := range e.outboxIDs(turnframe.OutboxFilter{Status: turnframe.OutboxPending, Limit: turnframe.MaxLimit}) {
			if slices.Index(all, id) > 2 {
				want = append(want, id)
			}
		}
		is.True(len(want) > 0) // the case means something
		is.Equal(got, want)    // Pending rows enqueued after it
	})
	t.Run("AfterAnotherAccountsRowIsNotFound", func(t *testing.T) {
		is := is.New(t)
		_, err := e.s.ListOutbox(e.ctx, turnframe.OutboxFilter{Account: acme, After: all[1], Limit: 10}) // all[1] is globex's
		is.True(errors.Is(err, turnframe.ErrNotFound))                                                   // a tenant learns nothing of another's rows
		is.Equal(len(e.outboxIDs(turnframe.OutboxFilter{Account: globex, After: all[1], Limit: 10})), 5) // its own account pages on
	})
	t.Run("AfterTheLastRow", func(t *testing.T) {
		is := is.New(t)
		is.Equal(len(e.outboxIDs(turnframe.OutboxFilter{After: all[len(all)-1], Limit: 10})), 0) // nothing after it
	})
	// The listings Run and Recover make, which a store may serve from an
	// index of the status alone: the same rules as any other status.
	t.Run("TheUncertainStatusesListExactlyTheirRows", func(t *testing.T) {
		is := is.New(t)
		unknown, intervention := turnframe.OutboxOutcomeUnknown, turnframe.OutboxNeedsIntervention
		list := func(f turnframe.OutboxFilter) []turnframe.OutboxID {
			f.Limit = turnframe.MaxLimit
			return e.outboxIDs(f)
		}
		is.Equal(list(turnframe.OutboxFilter{Status: unknown}), all[8:9])                                     // all[8] is OutcomeUnknown
		is.Equal(list(turnframe.OutboxFilter{Status: intervention}), all[4:5])                                // all[4] is NeedsIntervention
		is.Equal(list(turnframe.OutboxFilter{Status: unknown, Account: acme}), all[8:9])                      // its account's
		is.Equal(list(turnframe.OutboxFilter{Status: intervention, Account: globex}), []turnframe.OutboxID{}) // not another's
		is.Equal(list(turnframe.OutboxFilter{Status: unknown, After: all[4]}), all[8:9])                      // after a row of another status
		is.Equal(list(turnframe.OutboxFilter{Status: intervention, After: all[4]}), []turnframe.OutboxID{})   // nothing after the last one
		is.Equal(list(turnframe.OutboxFilter{Status: unknown, Account: acme, After: all[2]}), all[8:9])       // all three
	})
}

func testOutboxPagesMissing(t *testing.T, e *env) {
	is := is.New(t)
	_, err := e.s.ListOutbox(e.ctx, turnframe.OutboxFilter{After: e.ids.OutboxID(at(0)), Limit: 10})
	is.True(errors.Is(err, turnframe.ErrNotFound)) // a row that never was

	rows := e.enqueue(acme, at(0), message(""), message(""))
	c := e.claim(at(time.Second), 1, worker)[0]
	is.Equal(c.ID, rows[0].ID)                                                // the first row
	is.NoErr(turnframe.CompleteClaim(e.ctx, e.s, c, "ch_1", at(time.Second))) // finished
	n, err := e.s.Prune(e.ctx, at(time.Hour))
	is.NoErr(err)  // prune
	is.Equal(n, 1) // the first row is gone
	_, err = e.s.ListOutbox(e.ctx, turnframe.OutboxFilter{After: rows[0].ID, Limit: 10})
	is.True(errors.Is(err, turnframe.ErrNotFound))                                      // a pruned row
	is.Equal(len(e.outboxIDs(turnframe.OutboxFilter{After: rows[1].ID, Limit: 10})), 0) // the row kept is a cursor still
}
