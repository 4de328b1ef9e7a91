package storetest

import (
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// The rules of adoption (issue 12 item 12): an abandoned turn never runs
// its commands, so a new turn that admits the same command takes over an
// entry that never settled; any other existing entry stands as it is.

func adoptionTests() []test {
	return []test{
		{"ReadmittingAPendingEntryOfAnAbandonedTurnMovesItToTheNewTurnInAdmitOrder", testAdoptPending},
		{"AnExecutingEntryOfAnAbandonedTurnIsAdoptedOnlyOnceItsLeaseEnded", testAdoptExecuting},
		{"ASettledEntryOrOneOfATurnNotAbandonedIsReturnedAsItIsNotMoved", testAdoptNot},
		{"ARepeatOnlyWriteAdmitsNothingNewAndAdoptsNothing", testRepeatOnly},
	}
}

// keysOf returns the keys of entries, in order.
func keysOf(es []turnframe.JournalEntry) []turnframe.IdempotencyKey {
	keys := make([]turnframe.IdempotencyKey, len(es))
	for i, e := range es {
		keys[i] = e.Key
	}
	return keys
}

// forTurn reads the entries of a turn, which must succeed.
func (e *env) forTurn(account turnframe.AccountID, turn turnframe.TurnID) []turnframe.JournalEntry {
	e.t.Helper()
	es, err := e.s.ForTurn(e.ctx, account, turn)
	if err != nil {
		e.t.Fatalf("for turn: %v", err)
	}
	return es
}

func testAdoptPending(t *testing.T, e *env) {
	is := is.New(t)
	old := e.begin(acme, at(0))
	k, stay := e.freshKey(), e.freshKey()
	e.admit(acme, old, at(0), command(stay, "booking/0"), command(k, "booking/1"))
	e.apply(turnframe.Write{Account: acme, Turn: old, Now: at(time.Second), Phase: turnframe.PhaseAbandoned})

	turn := e.begin(acme, at(2*time.Second))
	first, before, after := e.freshKey(), e.freshKey(), e.freshKey()
	e.admit(acme, turn, at(2*time.Second), command(first, "booking/2")) // admitted in an earlier write
	a := e.admit(acme, turn, at(3*time.Second), command(before, "booking/3"), command(k, "booking/1"), command(after, "booking/4"))

	got := a.Admitted[1]
	is.Equal(got.Key, k)                                                                         // the readmitted command
	is.Equal(got.Turn, turn)                                                                     // moved to the new turn
	is.Equal(got.Status, turnframe.JournalPending)                                               // still never run
	is.True(got.UpdatedAt.Equal(at(3 * time.Second)))                                            // stamped by the adoption
	is.True(got.AdmittedAt.Equal(at(0)))                                                         // admitted when it first was
	is.True(sameEntry(e.entry(acme, k), got))                                                    // applied as stored
	is.Equal(keysOf(e.forTurn(acme, turn)), []turnframe.IdempotencyKey{first, before, k, after}) // after the entries admitted before it, in Admit order
	is.Equal(keysOf(e.forTurn(acme, old)), []turnframe.IdempotencyKey{stay})                     // the old turn no longer lists it

	attempt := e.ids.AttemptID(at(4 * time.Second))
	taken := e.settle(acme, turn, at(4*time.Second), take(k, attempt, turnframe.AttemptID{}))
	is.Equal(taken.Status, turnframe.JournalExecuting) // the new turn runs it
}

func testAdoptExecuting(t *testing.T, e *env) {
	is := is.New(t)
	old, k, attempt := e.running(acme, "booking/1", at(0)) // leased until at(lease)
	e.apply(turnframe.Write{Account: acme, Turn: old, Now: at(time.Second), Phase: turnframe.PhaseAbandoned})
	held := e.entry(acme, k)

	// While the lease runs, a new turn gets the entry as it is.
	w := e.beginWrite(acme, at(lease-time.Microsecond))
	w.Admit = []turnframe.Command{command(k, "booking/1")}
	a := e.apply(w)
	is.True(sameEntry(a.Admitted[0], held))                               // returned as it is
	is.Equal(a.Admitted[0].Turn, old)                                     // still the old turn's
	is.Equal(len(e.forTurn(acme, w.Turn)), 0)                             // not listed by the new turn
	is.Equal(keysOf(e.forTurn(acme, old)), []turnframe.IdempotencyKey{k}) // still listed by the old turn

	// Once it ended, a new turn adopts it.
	w = e.beginWrite(acme, at(lease))
	w.Admit = []turnframe.Command{command(k, "booking/1")}
	a = e.apply(w)
	got := a.Admitted[0]
	is.Equal(got.Turn, w.Turn)                                               // adopted by the new turn
	is.Equal(got.Status, turnframe.JournalExecuting)                         // as it was
	is.Equal(got.Attempt, attempt)                                           // under the attempt that ran
	is.True(sameEntry(e.entry(acme, k), got))                                // applied as stored
	is.Equal(keysOf(e.forTurn(acme, w.Turn)), []turnframe.IdempotencyKey{k}) // listed by the new turn
	is.Equal(len(e.forTurn(acme, old)), 0)                                   // the old turn no longer lists it
	next := e.ids.AttemptID(at(lease))
	taken := e.settle(acme, w.Turn, at(lease), take(k, next, attempt))
	is.Equal(taken.Attempt, next) // the new turn takes it over
}

func testAdoptNot(t *testing.T, e *env) {
	for _, tc := range []struct {
		name string
		// setup leaves the entry under a fresh key in the state the case
		// names, in a turn of its own: the turn and the key.
		setup func(e *env) (turnframe.TurnID, turnframe.IdempotencyKey)
	}{
		{"PendingInAPlannedTurn", func(e *env) (turnframe.TurnID, turnframe.IdempotencyKey) {
			turn := e.turnIn(acme, turnframe.PhasePlanned, at(0))
			key := e.freshKey()
			e.admit(acme, turn, at(0), command(key, "booking/1"))
			return turn, key
		}},
		{"PendingInADeliveredTurnAfterAResend", func(e *env) (turnframe.TurnID, turnframe.IdempotencyKey) {
			turn, key, _ := e.entryIn(acme, turnframe.JournalOutcomeUnknown, at(0))
			e.apply(turnframe.Write{Account: acme, Turn: turn, Now: at(0), Phase: turnframe.PhaseDelivered})
			e.settle(acme, turn, at(0), turnframe.Settlement{Key: key, To: turnframe.JournalPending})
			return turn, key
		}},
		{"ExecutingWithItsLeaseEndedInATurnNotAbandoned", func(e *env) (turnframe.TurnID, turnframe.IdempotencyKey) {
			turn, key, _ := e.entryIn(acme, turnframe.JournalExecuting, at(-time.Hour))
			return turn, key
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { testAdoptNone(t, newEnv(t, e.open), tc.setup) })
	}
	for _, status := range []turnframe.JournalStatus{turnframe.JournalCommitted, turnframe.JournalRejected, turnframe.JournalOutcomeUnknown, turnframe.JournalNeedsIntervention} {
		t.Run(status.String()+"InAnAbandonedTurn", func(t *testing.T) {
			testAdoptNone(t, newEnv(t, e.open), func(e *env) (turnframe.TurnID, turnframe.IdempotencyKey) {
				turn, key, _ := e.entryIn(acme, status, at(0))
				e.apply(turnframe.Write{Account: acme, Turn: turn, Now: at(0), Phase: turnframe.PhaseAbandoned})
				return turn, key
			})
		})
	}
}

// testAdoptNone readmits the entry setup leaves in a new turn and checks
// that it is returned as it is and stays where it was.
func testAdoptNone(t *testing.T, e *env, setup func(e *env) (turnframe.TurnID, turnframe.IdempotencyKey)) {
	is := is.New(t)
	old, key := setup(e)
	stored := e.entry(acme, key)
	turn := e.begin(acme, at(time.Hour))
	a := e.admit(acme, turn, at(time.Hour), command(key, "booking/1"))
	is.True(sameEntry(a.Admitted[0], stored))                               // returned as it is
	is.True(sameEntry(e.entry(acme, key), stored))                          // and stored as it was
	is.Equal(len(e.forTurn(acme, turn)), 0)                                 // not listed by the new turn
	is.Equal(keysOf(e.forTurn(acme, old)), []turnframe.IdempotencyKey{key}) // still listed by its own
}

// testRepeatOnly: a Write that only repeats admissions (Write.RepeatOnly,
// a Plan of a turn planned already) returns the entries its keys admitted
// before — its own turn's, a live turn's, a settled one of an abandoned
// turn — and refuses, writing nothing, a new key or one it would adopt.
func testRepeatOnly(t *testing.T, e *env) {
	is := is.New(t)
	turn := e.turnIn(acme, turnframe.PhasePlanned, at(0))
	own := e.freshKey()
	e.admit(acme, turn, at(0), command(own, "booking/1"))

	live := e.turnIn(acme, turnframe.PhasePlanned, at(0))
	held := e.freshKey()
	e.admit(acme, live, at(0), command(held, "booking/2"))

	settled, done, _ := e.entryIn(acme, turnframe.JournalCommitted, at(0))
	e.apply(turnframe.Write{Account: acme, Turn: settled, Now: at(0), Phase: turnframe.PhaseAbandoned})

	gone := e.turnIn(acme, turnframe.PhasePlanned, at(0))
	adoptable := e.freshKey()
	e.admit(acme, gone, at(0), command(adoptable, "booking/4"))
	e.apply(turnframe.Write{Account: acme, Turn: gone, Now: at(0), Phase: turnframe.PhaseAbandoned})

	repeat := func(keys ...turnframe.IdempotencyKey) turnframe.Write {
		w := turnframe.Write{Account: acme, Turn: turn, Now: at(time.Second), Phase: turnframe.PhasePlanned, RepeatOnly: true}
		for _, k := range keys {
			w.Admit = append(w.Admit, e.entry(acme, k).Command)
		}
		return w
	}
	a := e.apply(repeat(own, held, done))
	is.Equal(keysOf(a.Admitted), []turnframe.IdempotencyKey{own, held, done})                // each as admitted before
	is.Equal([]turnframe.TurnID{a.Admitted[0].Turn, a.Admitted[1].Turn, a.Admitted[2].Turn}, // and where it was
		[]turnframe.TurnID{turn, live, settled})
	is.Equal(len(e.forTurn(acme, turn)), 1) // nothing new in the turn

	fresh := repeat(own)
	fresh.Admit = append(fresh.Admit, command(e.freshKey(), "booking/5"))
	e.refused(fresh, turnframe.ErrConflict, "a repeat with a new key")
	e.refused(repeat(own, adoptable), turnframe.ErrConflict, "a repeat that would adopt")
	is.Equal(e.entry(acme, adoptable).Turn, gone) // it stays in its abandoned turn
}
