package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/storekit"
)

func journalTests() []test {
	return []test{
		{"AdmitCreatesPendingEntriesInAdmissionOrder", testAdmitPending},
		{"JournalEntryMakesEveryDocumentedMove", testEntryAllowed},
		{"JournalEntryRefusesEveryOtherMoveAndChangesNothing", testEntryRefused},
		{"ASupersededAttemptCannotSettleItsEntry", testEntrySupersededAttempt},
		{"OnlyItsHolderPutsAnExecutingEntryBack", testEntryPutBackByHolderOnly},
		{"AnEntryOfATurnAbandonedSinceItsTakeIsNotPutBack", testEntryPutBackAbandoned},
		{"SettlingAKeyOfAnotherTurnOrNoKeyIsNotFound", testSettleOtherTurn},
		{"ReadmittingTheSameCommandReturnsTheExistingEntryAndRunsNothing", testReadmitSame},
		{"ReusingAKeyForAnotherCommandIsConflictAndWritesNothing", testReadmitDifferent},
		{"ATerminalTurnAdmitsNoCommand", testAdmitTerminal},
		{"ACommittedEntryRecordsTheEventsItAppended", testCommittedEventIDs},
		{"ByKeyOfAKeyNeverUsedIsNotFound", testByKeyMissing},
		{"ASettlementFencedOnAStatusTheEntryLeftIsConflictAndChangesNothing", testSettleFrom},
		{"ATakeFencedOnPendingNeverTakesOverAnAttempt", testTakeFromPending},
	}
}

// testTakeFromPending: a take fenced on Pending (Settlement.From) is how
// the runtime asks for a command whose Remote forbids a blind rerun: it
// never takes over an attempt, even one whose lease ended on the store's
// clock and that names it as Prior; the same take unfenced does.
func testTakeFromPending(t *testing.T, e *env) {
	is := is.New(t)
	turn, key, held := e.entryIn(acme, turnframe.JournalExecuting, at(0))
	after := at(lease + time.Second) // the holder's lease ended
	fenced := take(key, e.ids.AttemptID(after), held)
	fenced.From = turnframe.JournalPending
	e.refused(turnframe.Write{Account: acme, Turn: turn, Now: after, Settle: []turnframe.Settlement{fenced}}, turnframe.ErrConflict, "take over from pending")
	is.Equal(e.entry(acme, key).Attempt, held) // still the holder's

	e.apply(turnframe.Write{Account: acme, Turn: turn, Now: after, Settle: []turnframe.Settlement{take(key, e.ids.AttemptID(after), held)}})
	is.True(e.entry(acme, key).Attempt != held) // unfenced, the take-over lands

	turn, key, _ = e.entryIn(acme, turnframe.JournalPending, at(0))
	fenced = take(key, e.ids.AttemptID(after), turnframe.AttemptID{})
	fenced.From = turnframe.JournalPending
	e.apply(turnframe.Write{Account: acme, Turn: turn, Now: after, Settle: []turnframe.Settlement{fenced}})
	is.Equal(e.entry(acme, key).Status, turnframe.JournalExecuting) // from Pending, it takes
}

// testSettleFrom: Settlement.From is a compare-and-set on the entry's
// status, judged in the store's transaction: a reconciliation that read
// the entry OutcomeUnknown lands only while it still is.
func testSettleFrom(t *testing.T, e *env) {
	is := is.New(t)
	turn, key, _ := e.entryIn(acme, turnframe.JournalOutcomeUnknown, at(0))
	for _, stale := range []turnframe.JournalStatus{turnframe.JournalExecuting, turnframe.JournalNeedsIntervention, turnframe.JournalPending} {
		e.refused(turnframe.Write{Account: acme, Turn: turn, Now: at(time.Minute),
			Settle: []turnframe.Settlement{{Key: key, To: turnframe.JournalCommitted, From: stale}}}, turnframe.ErrConflict, "settle from "+stale.String())
	}
	e.apply(turnframe.Write{Account: acme, Turn: turn, Now: at(time.Minute),
		Settle: []turnframe.Settlement{{Key: key, To: turnframe.JournalCommitted, From: turnframe.JournalOutcomeUnknown}}})
	is.Equal(e.entry(acme, key).Status, turnframe.JournalCommitted) // the status read: it lands
}

var allEntryStatuses = []turnframe.JournalStatus{
	turnframe.JournalPending, turnframe.JournalExecuting, turnframe.JournalCommitted,
	turnframe.JournalRejected, turnframe.JournalOutcomeUnknown, turnframe.JournalNeedsIntervention,
}

// entryAllowed is the journal machine of storekit.NextEntry (DESIGN.md,
// "State machines"), written out by status, for the moves settlementTo
// makes (by the app, which may intervene).
func entryAllowed(from, to turnframe.JournalStatus) bool {
	switch from {
	case turnframe.JournalPending: // taken, or settled by a local attempt
		return to == turnframe.JournalExecuting || to == turnframe.JournalCommitted || to == turnframe.JournalRejected ||
			to == turnframe.JournalOutcomeUnknown
	case turnframe.JournalExecuting: // Pending: put back by its holder (settlementTo names it)
		return to != turnframe.JournalNeedsIntervention
	case turnframe.JournalOutcomeUnknown:
		return to == turnframe.JournalCommitted || to == turnframe.JournalRejected || to == turnframe.JournalPending ||
			to == turnframe.JournalNeedsIntervention
	case turnframe.JournalNeedsIntervention:
		return to == turnframe.JournalCommitted || to == turnframe.JournalRejected || to == turnframe.JournalPending
	}
	return false
}

// entryIn admits a command in a new turn of account and moves its entry to
// status: the turn, the key and the attempt that ran (zero if none).
func (e *env) entryIn(account turnframe.AccountID, status turnframe.JournalStatus, now time.Time) (turnframe.TurnID, turnframe.IdempotencyKey, turnframe.AttemptID) {
	e.t.Helper()
	if status == turnframe.JournalPending {
		turn := e.begin(account, now)
		key := e.freshKey()
		e.admit(account, turn, now, command(key, "booking/1"))
		return turn, key, turnframe.AttemptID{}
	}
	turn, key, attempt := e.running(account, "booking/1", now)
	switch status {
	case turnframe.JournalCommitted:
		e.commit(account, turn, key, attempt, now, []turnframe.Event{{Case: "booking/1", Type: "booked"}}, nil)
	case turnframe.JournalRejected:
		e.settle(account, turn, now, turnframe.Settlement{Key: key, To: status, Attempt: attempt, Code: "sold_out"})
	case turnframe.JournalOutcomeUnknown:
		e.settle(account, turn, now, turnframe.Settlement{Key: key, To: status, Attempt: attempt, RemoteRef: "ref-1"})
	case turnframe.JournalNeedsIntervention:
		e.settle(account, turn, now, turnframe.Settlement{Key: key, To: turnframe.JournalOutcomeUnknown, Attempt: attempt, RemoteRef: "ref-1"})
		e.apply(turnframe.Write{Account: account, Turn: turn, Now: now, Actor: turnframe.ActorPolicy, Note: "the remote cannot be asked",
			Settle: []turnframe.Settlement{{Key: key, To: status, Code: "policy.no_lookup"}}})
	}
	return turn, key, attempt
}

// settlementTo returns a settlement of key, an entry in status from, to
// status to with the fields that status uses: a move to Executing is
// newAttempt taking the entry from running, a move out of Pending is
// newAttempt as a local attempt (seen under running), a move out of
// OutcomeUnknown or NeedsIntervention is a reconciliation (no attempt),
// any other is by running.
func settlementTo(key turnframe.IdempotencyKey, from, to turnframe.JournalStatus, running, newAttempt turnframe.AttemptID) turnframe.Settlement {
	s := turnframe.Settlement{Key: key, To: to, Attempt: running}
	switch {
	case from.IsUncertain():
		s.Attempt = turnframe.AttemptID{}
	case from == turnframe.JournalPending:
		s.Attempt, s.Prior = newAttempt, running
	}
	switch to {
	case turnframe.JournalExecuting:
		s = take(key, newAttempt, running)
	case turnframe.JournalRejected:
		s.Code = "no_seats"
	case turnframe.JournalOutcomeUnknown:
		s.Code, s.RemoteRef = "http.timeout", "ref-2"
	case turnframe.JournalNeedsIntervention:
		s.Code = "policy.unsure"
	}
	return s
}

func testAdmitPending(t *testing.T, e *env) {
	is := is.New(t)
	turn := e.begin(acme, at(0))
	cmds := []turnframe.Command{command("k3", "booking/3"), command("k1", "booking/1"), command("k2", "booking/2")}
	a := e.admit(acme, turn, at(time.Second), cmds...)
	is.Equal(len(a.Admitted), 3) // one per command
	for i, got := range a.Admitted {
		is.Equal(got.Key, cmds[i].Key)                 // applied in order
		is.Equal(got.Status, turnframe.JournalPending) // admitted pending
	}
	es, err := e.s.ForTurn(e.ctx, acme, turn)
	is.NoErr(err)        // for turn
	is.Equal(len(es), 3) // every entry
	for i, got := range es {
		want := cmds[i]
		is.Equal(got.Key, want.Key)                     // admission order
		is.Equal(got.Case, want.Case)                   // case
		is.Equal(got.Name, want.Name)                   // name
		is.True(bytes.Equal(got.Payload, want.Payload)) // payload
		is.Equal(got.Account, acme)                     // account
		is.Equal(got.Turn, turn)                        // turn
		is.Equal(got.Status, turnframe.JournalPending)  // pending
		is.True(got.Attempt.IsZero())                   // never run
		is.Equal(got.Attempts, 0)                       // no attempt
		is.Equal(len(got.EventIDs), 0)                  // no events
		is.True(got.AdmittedAt.Equal(at(time.Second)))  // admitted at
		is.True(got.UpdatedAt.Equal(at(time.Second)))   // updated at
	}
	byKey := e.entry(acme, "k1")
	is.Equal(byKey.Case, turnframe.CaseKey("booking/1")) // by key
}

func testEntryAllowed(t *testing.T, e *env) {
	for _, from := range allEntryStatuses {
		for _, to := range allEntryStatuses {
			if !entryAllowed(from, to) {
				continue
			}
			t.Run(fmt.Sprintf("%v_to_%v", from, to), func(t *testing.T) {
				is := is.New(t)
				turn, key, running := e.entryIn(acme, from, at(0))
				before := e.entry(acme, key)
				phase := e.phase(acme, turn)
				now := at(lease) // an executing entry's lease ended: another attempt may take it over
				next := e.ids.AttemptID(now)
				s := settlementTo(key, from, to, running, next)
				got := e.settle(acme, turn, now, s)
				stored := e.entry(acme, key)
				is.Equal(got, stored) // applied as stored
				want, err := storekit.NextEntry(before, s, nil, phase, "", now)
				is.NoErr(err)                                       // the rule allows the move
				is.True(sameEntry(stored, want))                    // stored as the rule says
				is.Equal(stored.Status, to)                         // moved
				is.True(stored.UpdatedAt.Equal(now))                // stamped
				is.True(stored.AdmittedAt.Equal(before.AdmittedAt)) // admission kept
				if to != turnframe.JournalExecuting {
					is.True(stored.LeaseUntil.IsZero()) // a lease only while executing
				}
				switch {
				case to == turnframe.JournalExecuting:
					is.Equal(stored.Attempt, next)                   // the new attempt runs
					is.Equal(stored.Attempts, before.Attempts+1)     // counted
					is.True(stored.LeaseUntil.Equal(now.Add(lease))) // held until now + lease
				case from == turnframe.JournalPending:
					is.Equal(stored.Attempt, next)               // the local attempt that ran
					is.Equal(stored.Attempts, before.Attempts+1) // counted as a take counts it
				}
				switch to {
				case turnframe.JournalRejected:
					is.Equal(stored.Code, "no_seats") // code kept
				case turnframe.JournalOutcomeUnknown:
					is.Equal(stored.RemoteRef, "ref-2")   // remote ref kept
					is.Equal(stored.Code, "http.timeout") // code kept
				case turnframe.JournalNeedsIntervention:
					is.Equal(stored.Code, "policy.unsure") // code kept
					is.Equal(stored.RemoteRef, "ref-1")    // the remote's reference kept
				}
				switch {
				case from == turnframe.JournalExecuting && to == turnframe.JournalPending:
					is.Equal(stored.Attempt, before.Attempt)     // the attempt put back, for the next take's compare-and-set
					is.Equal(stored.Attempts, before.Attempts-1) // never called out: not counted
				case to != turnframe.JournalExecuting && from != turnframe.JournalPending:
					is.Equal(stored.Attempt, before.Attempt)   // under the attempt that ran
					is.Equal(stored.Attempts, before.Attempts) // not an attempt
				}
			})
		}
	}
}

func testEntryRefused(t *testing.T, e *env) {
	for _, from := range allEntryStatuses {
		for _, to := range allEntryStatuses {
			if entryAllowed(from, to) {
				continue
			}
			t.Run(fmt.Sprintf("%v_to_%v", from, to), func(t *testing.T) {
				is := is.New(t)
				turn, key, running := e.entryIn(acme, from, at(0))
				now := at(lease)
				s := settlementTo(key, from, to, running, e.ids.AttemptID(now))
				e.refused(turnframe.Write{Account: acme, Turn: turn, Now: now, Settle: []turnframe.Settlement{s},
					Admit: []turnframe.Command{command(e.freshKey(), "booking/9")}}, turnframe.ErrConflict, "refused entry move")
				is.Equal(e.entry(acme, key).Status, from) // status kept
			})
		}
	}
}

func testEntrySupersededAttempt(t *testing.T, e *env) {
	is := is.New(t)
	turn, key, first := e.running(acme, "booking/1", at(0))
	second := e.execute(acme, turn, key, at(lease)) // the first lease ended: a resumed attempt takes over
	is.Equal(e.entry(acme, key).Attempts, 2)        // two attempts started
	for _, to := range []turnframe.JournalStatus{turnframe.JournalExecuting, turnframe.JournalCommitted, turnframe.JournalRejected, turnframe.JournalOutcomeUnknown, turnframe.JournalPending} {
		s := settlementTo(key, turnframe.JournalExecuting, to, first, turnframe.AttemptID{})
		if to == turnframe.JournalExecuting {
			s = turnframe.Settlement{Key: key, To: to, Attempt: first, Lease: lease} // renewing a lease it lost
		}
		e.refused(turnframe.Write{Account: acme, Turn: turn, Now: at(lease + time.Second), Settle: []turnframe.Settlement{s}},
			turnframe.ErrConflict, "settle with the superseded attempt to "+to.String())
	}
	got := e.settle(acme, turn, at(lease+2*time.Second), turnframe.Settlement{Key: key, To: turnframe.JournalCommitted, Attempt: second})
	is.Equal(got.Status, turnframe.JournalCommitted) // the running attempt settles
}

// testEntryPutBackByHolderOnly: an attempt that took an entry and never
// called out puts it back to Pending, keeping its code for the next take;
// a reconciliation (no attempt) never does, whether the lease runs or
// ended: the attempt may have called out.
func testEntryPutBackByHolderOnly(t *testing.T, e *env) {
	is := is.New(t)
	turn, key, attempt := e.running(acme, "booking/1", at(0))
	for _, now := range []time.Duration{time.Second, lease + time.Second} {
		e.refused(turnframe.Write{Account: acme, Turn: turn, Now: at(now), Actor: turnframe.ActorRecovery,
			Settle: []turnframe.Settlement{{Key: key, To: turnframe.JournalPending, Prior: attempt}}},
			turnframe.ErrConflict, "a reconciliation puts a running entry back")
		is.Equal(e.entry(acme, key).Status, turnframe.JournalExecuting) // still the attempt's
	}
	got := e.settle(acme, turn, at(2*time.Second), turnframe.Settlement{Key: key, To: turnframe.JournalPending, Attempt: attempt, Code: "turnframe.policy.resent"})
	is.Equal(got.Status, turnframe.JournalPending) // put back
	is.Equal(got.Code, "turnframe.policy.resent")  // with the code the next take judges it by
	is.Equal(got.Attempt, attempt)                 // the next take's compare-and-set names it
	is.Equal(got.Attempts, 0)                      // it never called out
	hist := e.history(turnframe.JournalSubject(acme, key))
	back := hist[len(hist)-1]
	is.Equal([]string{back.From, back.To}, []string{"executing", "pending"}) // the put-back recorded
	is.Equal(back.Attempt, attempt.String())                                 // by the attempt that took it
	is.Equal(back.Code, "")                                                  // giving no reason: the code is the entry's before the take, not the put-back's
	next := e.execute(acme, turn, key, at(3*time.Second))                    // taken again at once
	is.True(next != attempt)                                                 // by a new attempt
	is.Equal(e.entry(acme, key).Attempts, 1)                                 // the one that counts
}

// testEntryPutBackAbandoned: the holder of an entry whose turn was
// abandoned since the take, and whose command a new turn planned while
// the entry was held (and so was told another turn holds it), may not put
// it back: Pending on the abandoned turn, it would run in no turn. It stays
// held; once the lease ended it is Stranded, and until recovery resolves
// it a later plan adopts it.
func testEntryPutBackAbandoned(t *testing.T, e *env) {
	is := is.New(t)
	old, key, attempt := e.running(acme, "booking/1", at(0))
	e.apply(turnframe.Write{Account: acme, Turn: old, Now: at(time.Second), Phase: turnframe.PhaseAbandoned})
	w := e.beginWrite(acme, at(2*time.Second)) // replanned while the lease runs
	w.Admit = []turnframe.Command{command(key, "booking/1")}
	is.Equal(e.apply(w).Admitted[0].Turn, old) // told the abandoned turn holds it: not adopted

	e.refused(turnframe.Write{Account: acme, Turn: old, Now: at(3 * time.Second),
		Settle: []turnframe.Settlement{{Key: key, To: turnframe.JournalPending, Attempt: attempt}}},
		turnframe.ErrConflict, "the holder puts back an entry of an abandoned turn")
	held := e.entry(acme, key)
	is.Equal(held.Status, turnframe.JournalExecuting)                            // still held
	is.True(turnframe.Stranded(held, turnframe.PhaseAbandoned, held.LeaseUntil)) // and Stranded once its lease ends
	later := e.beginWrite(acme, held.LeaseUntil)                                 // a later plan of the command
	later.Admit = []turnframe.Command{command(key, "booking/1")}
	is.Equal(e.apply(later).Admitted[0].Turn, later.Turn) // adopts it: the command is not lost
}

func testSettleOtherTurn(t *testing.T, e *env) {
	turn1, key, attempt := e.running(acme, "booking/1", at(0))
	turn2 := e.begin(acme, at(time.Second))
	_ = turn1
	e.refused(turnframe.Write{Account: acme, Turn: turn2, Now: at(2 * time.Second),
		Settle: []turnframe.Settlement{{Key: key, To: turnframe.JournalCommitted, Attempt: attempt}}}, turnframe.ErrNotFound, "settle another turn's entry")
	e.refused(turnframe.Write{Account: acme, Turn: turn2, Now: at(2 * time.Second),
		Settle: []turnframe.Settlement{take("never-admitted", e.ids.AttemptID(at(2*time.Second)), turnframe.AttemptID{})}}, turnframe.ErrNotFound, "settle a key never admitted")
}

func testReadmitSame(t *testing.T, e *env) {
	is := is.New(t)
	turn1, key, attempt := e.running(acme, "booking/1", at(0))
	e.commit(acme, turn1, key, attempt, at(time.Second), []turnframe.Event{{Case: "booking/1", Type: "booked"}}, nil)
	stored := e.entry(acme, key)

	// The same turn admits it again.
	a := e.admit(acme, turn1, at(2*time.Second), command(key, "booking/1"))
	is.Equal(len(a.Admitted), 1)              // one per command
	is.True(sameEntry(a.Admitted[0], stored)) // the existing entry, as stored
	// Another turn admits it, beside a new command.
	turn2 := e.begin(acme, at(3*time.Second))
	other := e.freshKey()
	a = e.admit(acme, turn2, at(4*time.Second), command(key, "booking/1"), command(other, "booking/2"))
	is.Equal(len(a.Admitted), 2)                             // one per command
	is.True(sameEntry(a.Admitted[0], stored))                // the existing entry, committed, of the first turn
	is.Equal(a.Admitted[0].Turn, turn1)                      // whatever its turn
	is.Equal(a.Admitted[1].Status, turnframe.JournalPending) // the new one admitted
	is.True(sameEntry(e.entry(acme, key), stored))           // the entry did not change

	es, err := e.s.ForTurn(e.ctx, acme, turn2)
	is.NoErr(err)        // for turn
	is.Equal(len(es), 1) // the second turn admitted only the new command
	is.Equal(es[0].Key, other)
	es, err = e.s.ForTurn(e.ctx, acme, turn1)
	is.NoErr(err)        // for turn
	is.Equal(len(es), 1) // the first turn holds its entry once
	rev, err := e.s.CaseRevision(e.ctx, acme, "booking/1")
	is.NoErr(err)                            // revision
	is.Equal(rev, turnframe.CaseRevision(1)) // nothing ran again
}

func testReadmitDifferent(t *testing.T, e *env) {
	turn, key, _ := e.running(acme, "booking/1", at(0))
	original := command(key, "booking/1")
	changed := map[string]turnframe.Command{
		"name":    {Key: key, Case: original.Case, Name: "cancel", Payload: original.Payload},
		"case":    {Key: key, Case: "booking/2", Name: original.Name, Payload: original.Payload},
		"payload": {Key: key, Case: original.Case, Name: original.Name, Payload: []byte(`{"seats":3}`)},
	}
	for what, cmd := range changed {
		// Alone, beside a new command, and from another turn.
		e.refused(turnframe.Write{Account: acme, Turn: turn, Now: at(time.Second), Admit: []turnframe.Command{cmd}},
			turnframe.ErrConflict, "key reused with another "+what)
		e.refused(turnframe.Write{Account: acme, Turn: turn, Now: at(time.Second),
			Admit: []turnframe.Command{command(e.freshKey(), "booking/3"), cmd}}, turnframe.ErrConflict, "key reused with another "+what+" after a new command")
		w := e.beginWrite(acme, at(time.Second))
		w.Admit = []turnframe.Command{cmd}
		e.refused(w, turnframe.ErrConflict, "key reused with another "+what+" by a new turn")
	}
}

func testAdmitTerminal(t *testing.T, e *env) {
	for _, p := range []turnframe.TurnPhase{turnframe.PhaseDelivered, turnframe.PhaseAbandoned} {
		turn := e.turnIn(acme, p, at(0))
		e.refused(turnframe.Write{Account: acme, Turn: turn, Now: at(time.Second), Admit: []turnframe.Command{command(e.freshKey(), "booking/1")}},
			turnframe.ErrConflict, "admit to a "+p.String()+" turn")
	}
}

func testCommittedEventIDs(t *testing.T, e *env) {
	is := is.New(t)
	turn, key, attempt := e.running(acme, "booking/1", at(0))
	a := e.commit(acme, turn, key, attempt, at(time.Second), []turnframe.Event{
		{Case: "booking/1", Type: "booked", Data: []byte("1")},
		{Case: "booking/1", Type: "paid", Data: []byte("2")},
	}, nil)
	is.Equal(len(a.Events), 2) // both appended
	want := []turnframe.EventID{a.Events[0].ID, a.Events[1].ID}
	is.Equal(a.Settled[0].EventIDs, want)       // applied entry
	is.Equal(e.entry(acme, key).EventIDs, want) // stored entry, in order
	evs, err := e.s.EventsByID(e.ctx, acme, want)
	is.NoErr(err)           // events by id
	is.Equal(evs, a.Events) // the same events
}

func testByKeyMissing(t *testing.T, e *env) {
	is := is.New(t)
	_, err := e.s.ByKey(e.ctx, acme, "never")
	is.True(errors.Is(err, turnframe.ErrNotFound)) // never used
}
