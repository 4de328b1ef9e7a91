package storetest

import (
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// The rules of a local attempt (turnframe.WithLocalCommand): a command
// whose handler makes no outside call is settled straight from Pending,
// under a new attempt id and the compare-and-set a take makes, with its
// events, outbox rows and phase move in the same Write; of two local
// attempts on one entry only the first lands, and the second writes
// nothing; nothing settles this way on an abandoned turn.

func localTests() []test {
	return []test{
		{"ALocalAttemptSettlesAPendingEntryWithItsEffectsInOneWrite", testLocalCommit},
		{"ALocalAttemptIsACompareAndSetAndTheLoserWritesNothing", testLocalCAS},
		{"NoLocalAttemptSettlesAnEntryOfAnAbandonedTurn", testLocalAbandoned},
		{"OfTwoLocalAttemptsCommittingOneEntryAtOnceExactlyOneLands", testLocalConcurrent},
	}
}

// localCommit returns the Write by which attempt, having seen the entry
// under key at prior, commits it from Pending with one event on c and one
// outbox row, advancing the turn to Committed.
func localCommit(account turnframe.AccountID, turn turnframe.TurnID, key turnframe.IdempotencyKey, c turnframe.CaseKey, attempt, prior turnframe.AttemptID, now time.Time) turnframe.Write {
	w := commitWrite(account, turn, key, attempt, now,
		[]turnframe.Event{{Case: c, Type: "booked", Data: []byte(attempt.String())}},
		[]turnframe.OutboxMessage{{Destination: "mail", Payload: []byte(attempt.String())}})
	w.Settle[0].Prior = prior
	w.Advance = turnframe.PhaseCommitted
	return w
}

func testLocalCommit(t *testing.T, e *env) {
	is := is.New(t)
	turn, key, _ := e.entryIn(acme, turnframe.JournalPending, at(0))
	is.Equal(e.phase(acme, turn), turnframe.PhaseReceived) // no take moved the turn
	attempt := e.ids.AttemptID(at(time.Second))
	a := e.apply(localCommit(acme, turn, key, "booking/1", attempt, turnframe.AttemptID{}, at(time.Second)))

	got := e.entry(acme, key)
	is.Equal(got.Status, turnframe.JournalCommitted)        // settled without a take
	is.Equal(got.Attempt, attempt)                          // under the attempt that ran
	is.Equal(got.Attempts, 1)                               // counted
	is.True(got.LeaseUntil.IsZero())                        // never leased
	is.Equal(len(got.EventIDs), 1)                          // its event recorded
	is.Equal(got.EventIDs[0], a.Events[0].ID)               // the one written with it
	is.Equal(len(a.Outbox), 1)                              // its outbox row
	is.Equal(a.Outbox[0].Key, key)                          // under the command's key
	is.Equal(a.Phase, turnframe.PhaseCommitted)             // the turn skipped ahead
	is.Equal(e.phase(acme, turn), turnframe.PhaseCommitted) // as stored

	hist, err := e.s.History(e.ctx, turnframe.JournalSubject(acme, key), 0, turnframe.MaxLimit)
	is.NoErr(err)
	last := hist[len(hist)-1]
	is.Equal(last.From, "pending")           // one record of the move…
	is.Equal(last.To, "committed")           // …straight to Committed
	is.Equal(last.Attempt, attempt.String()) // naming the attempt
}

func testLocalCAS(t *testing.T, e *env) {
	is := is.New(t)
	now := at(time.Second)
	turn, key, _ := e.entryIn(acme, turnframe.JournalPending, at(0))
	first, second := e.ids.AttemptID(now), e.ids.AttemptID(now)
	e.apply(localCommit(acme, turn, key, "booking/1", first, turnframe.AttemptID{}, now))
	e.refused(localCommit(acme, turn, key, "booking/1", second, turnframe.AttemptID{}, now), turnframe.ErrConflict,
		"a second local attempt on a settled entry")
	is.Equal(e.entry(acme, key).Attempt, first) // the first stands

	turn, key, _ = e.entryIn(acme, turnframe.JournalPending, at(0))
	taker := e.execute(acme, turn, key, now) // a take holds it
	e.refused(localCommit(acme, turn, key, "booking/1", e.ids.AttemptID(now), turnframe.AttemptID{}, now), turnframe.ErrConflict,
		"a local attempt on an entry a take holds")
	e.refused(localCommit(acme, turn, key, "booking/1", e.ids.AttemptID(now), taker, now), turnframe.ErrConflict,
		"a local attempt naming the holder as prior")
	is.Equal(e.entry(acme, key).Status, turnframe.JournalExecuting) // still the taker's

	turn, key, _ = e.entryIn(acme, turnframe.JournalPending, at(0))
	e.refused(localCommit(acme, turn, key, "booking/1", turnframe.AttemptID{}, turnframe.AttemptID{}, now), turnframe.ErrConflict,
		"a settlement of a pending entry without an attempt")
	e.refused(localCommit(acme, turn, key, "booking/1", e.ids.AttemptID(now), e.ids.AttemptID(now), now), turnframe.ErrConflict,
		"a local attempt with a prior the entry was never under")
}

func testLocalAbandoned(t *testing.T, e *env) {
	is := is.New(t)
	turn, key, _ := e.entryIn(acme, turnframe.JournalPending, at(0))
	e.apply(turnframe.Write{Account: acme, Turn: turn, Now: at(time.Second), Phase: turnframe.PhaseAbandoned})
	now := at(2 * time.Second)
	w := localCommit(acme, turn, key, "booking/1", e.ids.AttemptID(now), turnframe.AttemptID{}, now)
	w.Advance = 0
	e.refused(w, turnframe.ErrConflict, "a local attempt on an abandoned turn")
	is.Equal(e.entry(acme, key).Status, turnframe.JournalPending) // never ran
}

func testLocalConcurrent(t *testing.T, e *env) {
	is := is.New(t)
	rounds := 30
	if testing.Short() {
		rounds = 10
	}
	for round := range rounds {
		now := at(time.Duration(round) * time.Second)
		turn, key, _ := e.entryIn(acme, turnframe.JournalPending, now)
		c := e.entry(acme, key).Case
		attempts := [2]turnframe.AttemptID{e.ids.AttemptID(now), e.ids.AttemptID(now)}
		won := e.oneOfTwo(round, func(i int) turnframe.Write {
			return localCommit(acme, turn, key, c, attempts[i], turnframe.AttemptID{}, now)
		})
		got := e.entry(acme, key)
		is.Equal(got.Attempt, attempts[won]) // under the winner's attempt
		is.Equal(got.Attempts, 1)            // counted once
		rows, err := e.s.ListOutbox(e.ctx, turnframe.OutboxFilter{Account: acme, Limit: turnframe.MaxLimit})
		is.NoErr(err)
		var payloads []string
		for _, r := range rows {
			if r.Turn == turn {
				payloads = append(payloads, string(r.Payload))
			}
		}
		is.Equal(payloads, []string{attempts[won].String()}) // one outbox row, written with the winning settlement
	}
}
