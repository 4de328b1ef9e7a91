package storetest

import (
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/storekit"
)

// The rules of the audit trail (issue 13): every move of a journal entry,
// an outbox row and a turn's phase appends one record, built by the root
// helpers (storekit.EntryHistory, RowHistory, PhaseHistory), in the step
// that makes the move; a renewal, an extension or a refused step records
// nothing. The suite compares what a store recorded with what the helper
// builds from the values before and after each move, never with records
// written out by hand.

func historyTests() []test {
	return []test{
		{"EveryMoveOfAJournalEntryIsRecordedOnceInOrder", testHistoryEntry},
		{"EveryMoveOfATurnsPhaseIsRecordedOnceInOrder", testHistoryTurn},
		{"EveryMoveOfAnOutboxRowIsRecordedOnceInOrder", testHistoryRow},
		{"LeaseRenewalsAndExtensionsRecordNothing", testHistoryRenewals},
		{"ATakeOverOfAnEntryWhoseLeaseEndedIsRecordedUnderTheNewAttempt", testHistoryTakeOver},
		{"ARowsRecordNamesItsAttemptNumberAndNoneBeforeItsFirstClaim", testHistoryRowAttempt},
		{"AnEntrysRecordKeepsTheCodeTheRemotesReferenceAndTheAttemptOfItsMove", testHistoryEntryRef},
		{"ARefusedWriteOrCallRecordsNothing", testHistoryRefused},
		{"AnAdoptedEntryKeepsItsHistoryAndRecordsNoMove", testHistoryAdoption},
		{"SeqIncreasesAcrossSubjectsInTheOrderTheMovesWereMade", testHistorySeq},
		{"HistoryPagesOldestFirstAfterASeqUpToLimit", testHistoryPages},
		{"HistoryOfAnotherTenantsSubjectOrOfNoneReadsEmpty", testHistoryOtherTenant},
		{"PruneDropsThePrunedRowsHistoryAndKeepsJournalAndTurnHistory", testHistoryPrune},
		{"PruneKeepsTheHistoryOfAKeySpelledLikeAPrunedRowsID", testHistoryPruneKeyLikeRow},
		{"PruneKeepsARowFinishedAtTheCutoffWithItsHistory", testHistoryPruneAtCutoff},
		{"RecordEvidenceRecordsTheSubjectsStatusAsItIsAndMovesNothing", testEvidence},
		{"RecordEvidenceOfASubjectThatDoesNotExistForItsAccountIsNotFound", testEvidenceMissing},
	}
}

// history reads every record of subject, which must succeed.
func (e *env) history(subject turnframe.Subject) []turnframe.HistoryRecord {
	e.t.Helper()
	recs, err := e.s.History(e.ctx, subject, 0, turnframe.MaxLimit)
	if err != nil {
		e.t.Fatalf("history of %v %q of %q: %v", subject.Kind, subject.Ref, subject.Account, err)
	}
	return recs
}

// checkHistory fails the test unless got holds want's records, in order,
// numbered by increasing Seq: Seq is the store's, and times are compared as
// instants.
func checkHistory(t *testing.T, got, want []turnframe.HistoryRecord, what string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d records, want %d:\ngot:  %+v\nwant: %+v", what, len(got), len(want), got, want)
	}
	for i := range got {
		g, w := got[i], want[i]
		if i > 0 && g.Seq <= got[i-1].Seq || g.Seq <= 0 {
			t.Fatalf("%s: record %d has Seq %d after %d: Seq must be positive and increase", what, i, g.Seq, got[max(i-1, 0)].Seq)
		}
		g.Seq, w.Seq = 0, 0
		if !g.At.Equal(w.At) {
			t.Fatalf("%s: record %d is at %v, want %v", what, i, g.At, w.At)
		}
		g.At, w.At = time.Time{}, time.Time{}
		if g != w {
			t.Fatalf("%s: record %d:\ngot:  %+v\nwant: %+v", what, i, got[i], want[i])
		}
	}
}

func testHistoryEntry(t *testing.T, e *env) {
	is := is.New(t)
	var want []turnframe.HistoryRecord
	key := e.freshKey()
	subject := turnframe.JournalSubject(acme, key)

	// Admitted by a named actor, with a note.
	w := e.beginWrite(acme, at(0))
	w.Admit, w.Actor, w.Note = []turnframe.Command{command(key, "booking/1")}, "app:intake", "the user asked"
	a := e.apply(w)
	turn, entry := w.Turn, a.Admitted[0]
	want = append(want, storekit.EntryHistory(turnframe.JournalEntry{}, entry, w.Actor, w.Note, w.Now))

	// move applies one settlement of the entry as actor with note at now,
	// and adds what the helper makes of it.
	move := func(s turnframe.Settlement, actor turnframe.Actor, note string, now time.Time) {
		t.Helper()
		w := turnframe.Write{Account: acme, Turn: turn, Now: now, Actor: actor, Note: note, Settle: []turnframe.Settlement{s}}
		moved := e.apply(w).Settled[0]
		want = append(want, storekit.EntryHistory(entry, moved, actor, note, now))
		entry = moved
	}
	first := e.ids.AttemptID(at(time.Second))
	move(take(key, first, turnframe.AttemptID{}), "", "", at(time.Second))
	move(turnframe.Settlement{Key: key, To: turnframe.JournalOutcomeUnknown, Attempt: first, Code: "http.timeout", RemoteRef: "req-1"}, "", "the call timed out", at(2*time.Second))
	move(turnframe.Settlement{Key: key, To: turnframe.JournalNeedsIntervention, Code: "policy.no_lookup"}, turnframe.ActorPolicy, "the remote cannot be asked", at(3*time.Second))
	move(turnframe.Settlement{Key: key, To: turnframe.JournalPending}, turnframe.ActorOperator, "the remote never got it", at(4*time.Second))
	second := e.ids.AttemptID(at(5 * time.Second))
	move(take(key, second, first), "", "", at(5*time.Second))
	move(turnframe.Settlement{Key: key, To: turnframe.JournalOutcomeUnknown, Code: turnframe.CodeLeaseEnded}, turnframe.ActorRecovery, "", entry.LeaseUntil)
	move(turnframe.Settlement{Key: key, To: turnframe.JournalCommitted, RemoteRef: "ch_1"}, turnframe.ActorPolicy, "the lookup found it", at(time.Hour))

	got := e.history(subject)
	checkHistory(t, got, want, "entry history")
	is.Equal(got[0].From, "")                                         // created
	is.Equal(got[0].Actor, turnframe.Actor("app:intake"))             // by the write's actor
	is.Equal(got[1].Actor, turnframe.ActorApp)                        // a write that names none is the app's
	is.Equal(got[1].Attempt, first.String())                          // the attempt that took it
	is.Equal(got[len(got)-1].To, turnframe.JournalCommitted.String()) // settled
}

func testHistoryTurn(t *testing.T, e *env) {
	t.Run("StepByStep", func(t *testing.T) {
		is := is.New(t)
		e := newEnv(t, e.open)
		w := e.beginWrite(acme, at(0))
		w.Actor = "app:intake"
		e.apply(w)
		turn := w.Turn
		want := []turnframe.HistoryRecord{storekit.PhaseHistory(acme, turn, turnframe.PhaseUnset, turnframe.PhaseReceived, w.Actor, "", w.Now)}
		subject := turnframe.TurnSubject(acme, turn)

		// step applies w and adds the record of its move, if it made one.
		step := func(w turnframe.Write) {
			t.Helper()
			from := e.phase(acme, turn)
			to := e.apply(w).Phase
			if to != from {
				code := ""
				if w.Replay != nil {
					code = w.Replay.AbandonCode
				}
				want = append(want, storekit.PhaseHistory(acme, turn, from, to, w.Actor, code, w.Now))
			}
		}
		key := e.freshKey()
		step(turnframe.Write{Account: acme, Turn: turn, Now: at(time.Second), Phase: turnframe.PhaseReceived})                                                     // stays: nothing
		step(turnframe.Write{Account: acme, Turn: turn, Now: at(2 * time.Second), Phase: turnframe.PhasePlanned, Admit: []turnframe.Command{command(key, "b/1")}}) // planned
		attempt := e.ids.AttemptID(at(3 * time.Second))
		step(turnframe.Write{Account: acme, Turn: turn, Now: at(3 * time.Second), Advance: turnframe.PhaseExecuting, Settle: []turnframe.Settlement{take(key, attempt, turnframe.AttemptID{})}}) // executing
		step(turnframe.Write{Account: acme, Turn: turn, Now: at(4 * time.Second), Advance: turnframe.PhaseCommitted})                                                                            // skipped: nothing
		step(turnframe.Write{Account: acme, Turn: turn, Now: at(5 * time.Second), Replay: &turnframe.ReplayRecord{Response: "working on it"}})                                                   // replay only: nothing
		step(turnframe.Write{Account: acme, Turn: turn, Now: at(6 * time.Second), Phase: turnframe.PhaseAbandoned, Actor: turnframe.ActorOperator,
			Replay: &turnframe.ReplayRecord{AbandonCode: "user_left"}}) // abandoned, with the code of its replay record
		e.refused(turnframe.Write{Account: acme, Turn: turn, Now: at(7 * time.Second), Phase: turnframe.PhaseDelivered}, turnframe.ErrConflict, "deliver an abandoned turn")

		got := e.history(subject)
		checkHistory(t, got, want, "turn history")
		is.Equal(len(got), 4)              // begun, planned, executing, abandoned
		is.Equal(got[3].Code, "user_left") // the abandon code
		is.Equal(got[3].Actor, turnframe.ActorOperator)
	})
	t.Run("BegunAndMovedInOneWrite", func(t *testing.T) {
		e := newEnv(t, e.open)
		w := e.beginWrite(globex, at(0))
		w.Phase = turnframe.PhasePlanned
		e.apply(w)
		checkHistory(t, e.history(turnframe.TurnSubject(globex, w.Turn)), []turnframe.HistoryRecord{
			storekit.PhaseHistory(globex, w.Turn, turnframe.PhaseUnset, turnframe.PhaseReceived, "", "", w.Now),
			storekit.PhaseHistory(globex, w.Turn, turnframe.PhaseReceived, turnframe.PhasePlanned, "", "", w.Now),
		}, "turn history")
	})
	t.Run("AdvancedToAbandoned", func(t *testing.T) {
		e := newEnv(t, e.open)
		turn := e.turnIn(acme, turnframe.PhaseInterpreted, at(0))
		w := turnframe.Write{Account: acme, Turn: turn, Now: at(time.Second), Advance: turnframe.PhaseAbandoned, Actor: "app:x",
			Replay: &turnframe.ReplayRecord{AbandonCode: "timeout"}}
		e.apply(w)
		got := e.history(turnframe.TurnSubject(acme, turn))
		checkHistory(t, got[len(got)-1:], []turnframe.HistoryRecord{
			storekit.PhaseHistory(acme, turn, turnframe.PhaseInterpreted, turnframe.PhaseAbandoned, w.Actor, "timeout", w.Now),
		}, "turn history")
	})
}

// rowStep is one move of an outbox row in testHistoryRow: what makes it,
// and the actor and note the trail must give it.
type rowStep struct {
	name  string
	do    func(e *env) error
	actor turnframe.Actor
	note  string
}

func testHistoryRow(t *testing.T, e *env) {
	is := is.New(t)
	c := turnframe.CaseKey("payment/1")
	turn, key, attempt := e.running(acme, c, at(0))
	w := commitWrite(acme, turn, key, attempt, at(0), []turnframe.Event{{Case: c, Type: "charged"}}, []turnframe.OutboxMessage{message("card-7")})
	w.Actor, w.Note = "app:billing", "order 7"
	id := e.apply(w).Outbox[0].ID
	want := []turnframe.HistoryRecord{storekit.RowHistory(turnframe.OutboxRecord{}, e.row(id), w.Actor, w.Note, w.Now)}

	var held turnframe.Claim
	claim := func(worker string, now time.Time) func(e *env) error {
		return func(e *env) error {
			cs, err := e.s.ClaimDue(e.ctx, now, 10, worker, lease)
			if err == nil && len(cs) == 1 {
				held = cs[0]
			}
			return err
		}
	}
	res := func(v turnframe.Verdict, actor turnframe.Actor, note string, now time.Time) func(e *env) error {
		return func(e *env) error {
			return e.s.Resolve(e.ctx, turnframe.Resolution{ID: id, Verdict: v, Code: "v." + v.String(), Actor: actor, Note: note, Now: now})
		}
	}
	steps := []rowStep{
		{"claim", claim("w1", at(time.Second)), turnframe.WorkerActor("w1"), ""},
		{"retry", func(e *env) error { return turnframe.RetryClaim(e.ctx, e.s, held, "http.503", at(2*time.Second)) }, turnframe.WorkerActor("w1"), ""},
		{"claim_again", claim("w2", at(2*time.Second)), turnframe.WorkerActor("w2"), ""},
		{"mark_unknown", func(e *env) error { return turnframe.MarkClaimUnknown(e.ctx, e.s, held, "req-1", at(3*time.Second)) }, turnframe.WorkerActor("w2"), ""},
		{"escalate", res(turnframe.VerdictEscalate, turnframe.ActorPolicy, "no lookup", at(4*time.Second)), turnframe.ActorPolicy, "no lookup"},
		{"resend", res(turnframe.VerdictResend, turnframe.ActorOperator, "never arrived", at(5*time.Second)), turnframe.ActorOperator, "never arrived"},
		{"claim_third", claim("w1", at(5*time.Second)), turnframe.WorkerActor("w1"), ""},
		{"expire", func(e *env) error { _, err := e.s.ExpireClaims(e.ctx, held.LeaseUntil); return err }, turnframe.ActorRecovery, ""},
		{"resolve_failed", res(turnframe.VerdictFailed, "", "", at(time.Minute)), turnframe.ActorApp, ""},
		{"requeue", func(e *env) error { return e.s.Requeue(e.ctx, id, 0, at(2*time.Minute)) }, turnframe.ActorOperator, ""},
		{"claim_fourth", claim("w3", at(2*time.Minute)), turnframe.WorkerActor("w3"), ""},
		{"release_claim", func(e *env) error { return e.s.ReleaseClaim(e.ctx, id, 0, at(3*time.Minute)) }, turnframe.ActorOperator, ""},
		{"claim_fifth", claim("w1", at(3*time.Minute)), turnframe.WorkerActor("w1"), ""},
		{"fail", func(e *env) error { return turnframe.FailClaim(e.ctx, e.s, held, "declined", at(4*time.Minute)) }, turnframe.WorkerActor("w1"), ""},
		{"requeue_again", func(e *env) error { return e.s.Requeue(e.ctx, id, 0, at(5*time.Minute)) }, turnframe.ActorOperator, ""},
		{"claim_sixth", claim("w2", at(5*time.Minute)), turnframe.WorkerActor("w2"), ""},
		{"withhold", func(e *env) error { // the Dispatcher, by the policy's rule, did not send it
			return settleOneBatch(e, turnframe.OutboxSettlement{Claim: held, To: turnframe.OutboxOutcomeUnknown,
				Code: turnframe.CodeKeyForgotten, Actor: turnframe.ActorPolicy, Note: "withheld", Now: at(5*time.Minute + time.Second)})
		}, turnframe.ActorPolicy, "withheld"},
		{"resend_again", res(turnframe.VerdictResend, turnframe.ActorOperator, "sent it myself", at(5*time.Minute+2*time.Second)), turnframe.ActorOperator, "sent it myself"},
		{"claim_seventh", claim("w2", at(5*time.Minute+2*time.Second)), turnframe.WorkerActor("w2"), ""},
		{"settle_batch", func(e *env) error {
			return settleOneBatch(e, turnframe.OutboxSettlement{Claim: held, To: turnframe.OutboxCompleted, Code: "http.201", RemoteRef: "ch_1", Now: at(6 * time.Minute)})
		}, turnframe.WorkerActor("w2"), ""},
	}
	for _, s := range steps {
		before := e.row(id)
		if err := s.do(e); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		after := e.row(id)
		is.True(after.Status != before.Status) // each step moves the row
		// The move happened at the row's update time: for a retry that is
		// the claim's time, as the store keeps it.
		want = append(want, storekit.RowHistory(before, after, s.actor, s.note, after.UpdatedAt))
	}
	got := e.history(turnframe.OutboxSubject(acme, id))
	checkHistory(t, got, want, "row history")
	is.Equal(got[0].From, "")                              // enqueued
	is.Equal(got[0].Actor, turnframe.Actor("app:billing")) // by the write's actor
}

func testHistoryRenewals(t *testing.T, e *env) {
	is := is.New(t)
	turn, key, attempt := e.running(acme, "booking/1", at(0))
	entry := turnframe.JournalSubject(acme, key)
	before := e.history(entry)
	e.settle(acme, turn, at(time.Second), turnframe.Settlement{Key: key, To: turnframe.JournalExecuting, Attempt: attempt, Lease: lease}) // renewed
	e.settle(acme, turn, at(2*time.Second), turnframe.Settlement{Key: key, To: turnframe.JournalExecuting, Attempt: attempt, Lease: time.Millisecond})
	is.Equal(e.history(entry), before) // a renewal moves nothing

	r := e.enqueue(acme, at(0), message(""))[0]
	row := turnframe.OutboxSubject(acme, r.ID)
	c := e.claimOne(at(time.Second), worker)
	rowBefore := e.history(row)
	is.NoErr(extendOne(e, c, at(2*time.Second), time.Minute)) // extended
	is.NoErr(extendOne(e, c, at(3*time.Second), time.Second)) // not shortened
	is.Equal(e.history(row), rowBefore)                       // an extension moves nothing
}

func testHistoryRefused(t *testing.T, e *env) {
	is := is.New(t)
	turn, key, attempt := e.running(acme, "booking/1", at(0))
	keyBefore := e.history(turnframe.JournalSubject(acme, key))
	turnBefore := e.history(turnframe.TurnSubject(acme, turn))

	// A write refused after a good begin, admit and settlement.
	w := e.beginWrite(acme, at(time.Second))
	fresh := e.freshKey()
	w.Admit = []turnframe.Command{command(fresh, "booking/2")}
	w.Settle = []turnframe.Settlement{take(fresh, e.ids.AttemptID(at(time.Second)), turnframe.AttemptID{}), {Key: "never", To: turnframe.JournalCommitted}}
	w.Phase = turnframe.PhasePlanned
	e.refused(w, turnframe.ErrNotFound, "a write refused at its last settlement")
	is.Equal(len(e.history(turnframe.TurnSubject(acme, w.Turn))), 0)    // no turn begun
	is.Equal(len(e.history(turnframe.JournalSubject(acme, fresh))), 0)  // no entry admitted or taken
	is.Equal(e.history(turnframe.JournalSubject(acme, key)), keyBefore) // the other entry untouched
	is.Equal(e.history(turnframe.TurnSubject(acme, turn)), turnBefore)  // and its turn

	// A commit refused by its phase, after its settlement and rows.
	w2 := commitWrite(acme, turn, key, attempt, at(time.Second), []turnframe.Event{{Case: "booking/1", Type: "booked"}}, []turnframe.OutboxMessage{message("")})
	w2.Admit = []turnframe.Command{command(e.freshKey(), "booking/3")}
	w2.Phase = turnframe.PhaseDelivered // the new command is pending
	e.refused(w2, turnframe.ErrConflict, "a commit refused by its phase")
	is.Equal(e.history(turnframe.JournalSubject(acme, key)), keyBefore) // the settlement did not land, nor its record

	// Calls on rows, refused.
	r, c := e.rowIn(turnframe.OutboxCompleted, true)
	rowBefore := e.history(turnframe.OutboxSubject(acme, r.ID))
	e.refusedOp("complete again", turnframe.ErrClaimLost, func() error { return turnframe.CompleteClaim(e.ctx, e.s, c, "", at(time.Hour)) })
	e.refusedOp("resolve a completed row", turnframe.ErrConflict, func() error {
		return e.s.Resolve(e.ctx, turnframe.Resolution{ID: r.ID, Verdict: turnframe.VerdictFailed, Now: at(time.Hour)})
	})
	e.refusedOp("requeue a completed row", turnframe.ErrConflict, func() error { return e.s.Requeue(e.ctx, r.ID, 0, at(time.Hour)) })
	e.refusedOp("release a completed row", turnframe.ErrConflict, func() error { return e.s.ReleaseClaim(e.ctx, r.ID, 0, at(time.Hour)) })
	is.Equal(e.history(turnframe.OutboxSubject(acme, r.ID)), rowBefore) // nothing recorded
}

func testHistoryAdoption(t *testing.T, e *env) {
	is := is.New(t)
	old := e.begin(acme, at(0))
	key := e.freshKey()
	e.admit(acme, old, at(0), command(key, "booking/1"))
	e.apply(turnframe.Write{Account: acme, Turn: old, Now: at(time.Second), Phase: turnframe.PhaseAbandoned})
	before := e.history(turnframe.JournalSubject(acme, key))
	is.Equal(len(before), 1) // admitted

	turn := e.begin(acme, at(2*time.Second))
	a := e.admit(acme, turn, at(2*time.Second), command(key, "booking/1"))
	is.Equal(a.Admitted[0].Turn, turn)                               // adopted
	is.Equal(e.history(turnframe.JournalSubject(acme, key)), before) // its status did not move: nothing recorded
	e.admit(acme, turn, at(3*time.Second), command(key, "booking/1"))
	is.Equal(e.history(turnframe.JournalSubject(acme, key)), before) // nor when it is admitted again
}

func testHistorySeq(t *testing.T, e *env) {
	is := is.New(t)
	r := e.enqueue(acme, at(0), message(""))[0] // row A enqueued
	turn := e.begin(globex, at(time.Second))    // turn B begun, in another account
	e.claimOne(at(2*time.Second), worker)       // row A claimed
	key := e.freshKey()
	e.admit(globex, turn, at(3*time.Second), command(key, "booking/1")) // entry C admitted

	row := e.history(turnframe.OutboxSubject(acme, r.ID))
	begun := e.history(turnframe.TurnSubject(globex, turn))
	admitted := e.history(turnframe.JournalSubject(globex, key))
	is.Equal(len(row), 2)                 // enqueued, claimed
	is.True(row[0].Seq < begun[0].Seq)    // enqueued before the turn began
	is.True(begun[0].Seq < row[1].Seq)    // which began before the claim
	is.True(row[1].Seq < admitted[0].Seq) // which came before the admission
}

func testHistoryPages(t *testing.T, e *env) {
	is := is.New(t)
	r, _ := e.rowIn(turnframe.OutboxNeedsIntervention, false)
	subject := turnframe.OutboxSubject(acme, r.ID)
	for i := range 4 {
		is.NoErr(e.s.RecordEvidence(e.ctx, turnframe.NewEvidence(subject, "", turnframe.ActorPolicy, "lookup.unsure", "", "", at(time.Duration(3+i)*time.Second))))
	}
	all := e.history(subject)
	is.Equal(len(all), 8) // enqueued, claimed, unknown, escalated, and four pieces of evidence

	for limit := 1; limit <= 3; limit++ {
		var got []turnframe.HistoryRecord
		after := int64(0)
		for page := 0; ; page++ {
			if page > len(all) {
				t.Fatalf("limit %d: more than %d pages", limit, page)
			}
			recs, err := e.s.History(e.ctx, subject, after, limit)
			is.NoErr(err)               // a page
			is.True(len(recs) <= limit) // at most limit
			if len(recs) == 0 {
				break
			}
			got = append(got, recs...)
			after = recs[len(recs)-1].Seq
		}
		is.Equal(got, all) // every record once, oldest first
	}
	recs, err := e.s.History(e.ctx, subject, all[4].Seq, turnframe.MaxLimit)
	is.NoErr(err)           // after a record
	is.Equal(recs, all[5:]) // only those after it
	recs, err = e.s.History(e.ctx, subject, all[len(all)-1].Seq, 10)
	is.NoErr(err)          // after the last
	is.Equal(len(recs), 0) // nothing
}

func testHistoryOtherTenant(t *testing.T, e *env) {
	is := is.New(t)
	turn, key, attempt := e.running(acme, "booking/1", at(0))
	r := e.commit(acme, turn, key, attempt, at(0), []turnframe.Event{{Case: "booking/1", Type: "booked"}}, []turnframe.OutboxMessage{message("")}).Outbox[0]
	for name, subject := range map[string]turnframe.Subject{
		"AnotherTenantsEntry": turnframe.JournalSubject(globex, key),
		"AnotherTenantsRow":   turnframe.OutboxSubject(globex, r.ID),
		"AnotherTenantsTurn":  turnframe.TurnSubject(globex, turn),
		"AKeyNeverUsed":       turnframe.JournalSubject(acme, "never"),
		"ARowThatNeverWas":    turnframe.OutboxSubject(acme, e.ids.OutboxID(at(0))),
		"ATurnThatNeverWas":   turnframe.TurnSubject(acme, e.ids.TurnID(at(0))),
	} {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			recs, err := e.s.History(e.ctx, subject, 0, 10)
			is.NoErr(err)          // no error
			is.Equal(len(recs), 0) // and no record
		})
	}
	is.True(len(e.history(turnframe.JournalSubject(acme, key))) > 0) // the owner reads its entry's history
	is.True(len(e.history(turnframe.OutboxSubject(acme, r.ID))) > 0) // its row's
	is.True(len(e.history(turnframe.TurnSubject(acme, turn))) > 0)   // and its turn's
}

func testHistoryPrune(t *testing.T, e *env) {
	is := is.New(t)
	turn, key, attempt := e.running(acme, "booking/1", at(0))
	rows := e.commit(acme, turn, key, attempt, at(0), []turnframe.Event{{Case: "booking/1", Type: "booked"}}, []turnframe.OutboxMessage{message(""), message(""), message("")}).Outbox
	e.apply(turnframe.Write{Account: acme, Turn: turn, Now: at(0), Phase: turnframe.PhaseDelivered})
	cs := e.claim(at(time.Second), 10, worker)
	is.Equal(len(cs), 3)                                                          // all claimed
	is.NoErr(turnframe.CompleteClaim(e.ctx, e.s, cs[0], "ch_1", at(time.Second))) // one completed
	is.NoErr(turnframe.FailClaim(e.ctx, e.s, cs[1], "refused", at(time.Second)))  // one failed
	keyHistory := e.history(turnframe.JournalSubject(acme, key))
	turnHistory := e.history(turnframe.TurnSubject(acme, turn))
	kept := e.history(turnframe.OutboxSubject(acme, rows[2].ID))

	n, err := e.s.Prune(e.ctx, at(time.Hour))
	is.NoErr(err)                                                          // prune
	is.Equal(n, 2)                                                         // the finished rows
	is.Equal(len(e.history(turnframe.OutboxSubject(acme, rows[0].ID))), 0) // a completed row's history went with it
	is.Equal(len(e.history(turnframe.OutboxSubject(acme, rows[1].ID))), 0) // and a failed row's
	is.Equal(e.history(turnframe.OutboxSubject(acme, rows[2].ID)), kept)   // a row kept keeps its history
	is.Equal(e.history(turnframe.JournalSubject(acme, key)), keyHistory)   // journal history is never pruned
	is.Equal(e.history(turnframe.TurnSubject(acme, turn)), turnHistory)    // nor a turn's
}

// testHistoryPruneAtCutoff: Prune deletes rows finished before the cutoff
// (storekit.Prunable), so a row finished at the cutoff stays, and so does
// its history: the history's delete applies the rows' rule to the
// microsecond.
func testHistoryPruneAtCutoff(t *testing.T, e *env) {
	is := is.New(t)
	turn, key, attempt := e.running(acme, "booking/1", at(0))
	rows := e.commit(acme, turn, key, attempt, at(0), nil, []turnframe.OutboxMessage{message("")}).Outbox
	cs := e.claim(at(time.Second), 1, worker)
	is.Equal(len(cs), 1)
	is.NoErr(turnframe.CompleteClaim(e.ctx, e.s, cs[0], "", at(time.Hour)))
	kept := e.history(turnframe.OutboxSubject(acme, rows[0].ID))
	is.True(len(kept) > 0)

	n, err := e.s.Prune(e.ctx, at(time.Hour)) // finished at the cutoff: not before it
	is.NoErr(err)
	is.Equal(n, 0)
	is.Equal(e.row(rows[0].ID).Status, turnframe.OutboxCompleted)        // the row stays
	is.Equal(e.history(turnframe.OutboxSubject(acme, rows[0].ID)), kept) // and so does its history
}

func testEvidence(t *testing.T, e *env) {
	for _, tc := range []struct {
		name string
		// setup leaves a subject in some state: the subject and its
		// status (a turn's phase) as the store reads it.
		setup func(e *env) (turnframe.Subject, func() string)
	}{
		{"AnUnknownJournalEntry", func(e *env) (turnframe.Subject, func() string) {
			_, key, _ := e.entryIn(acme, turnframe.JournalOutcomeUnknown, at(0))
			return turnframe.JournalSubject(acme, key), func() string { return e.entry(acme, key).Status.String() }
		}},
		{"AnOutboxRowThatNeedsIntervention", func(e *env) (turnframe.Subject, func() string) {
			r, _ := e.rowIn(turnframe.OutboxNeedsIntervention, false)
			return turnframe.OutboxSubject(acme, r.ID), func() string { return e.row(r.ID).Status.String() }
		}},
		{"ADeliveredTurn", func(e *env) (turnframe.Subject, func() string) {
			turn := e.turnIn(acme, turnframe.PhaseDelivered, at(0))
			return turnframe.TurnSubject(acme, turn), func() string { return e.phase(acme, turn).String() }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			e := newEnv(t, e.open)
			subject, status := tc.setup(e)
			before := e.history(subject)
			snap := e.snapshot()
			rec := turnframe.NewEvidence(subject, "guessed", turnframe.ActorPolicy, "lookup.unsure", "req-7", "the remote answered 202", at(time.Hour))
			rec.From, rec.To, rec.Evidence = "completed", "failed", false // the store's to set
			is.NoErr(e.s.RecordEvidence(e.ctx, rec))                      // recorded
			now := status()
			want := append(before, turnframe.NewEvidence(subject, now, turnframe.ActorPolicy, "lookup.unsure", "req-7", "the remote answered 202", at(time.Hour)))
			got := e.history(subject)
			checkHistory(t, got, want, "history with evidence")
			is.Equal(got[len(got)-1].From, got[len(got)-1].To) // it moved nothing
			is.True(got[len(got)-1].Evidence)                  // marked evidence

			// Nothing but the subject's history changed.
			after := e.snapshot()
			delete(snap, historyName(subject))
			delete(after, historyName(subject))
			e.same(snap, after, "evidence")
		})
	}
}

func testEvidenceMissing(t *testing.T, e *env) {
	is := is.New(t)
	turn, key, attempt := e.running(acme, "booking/1", at(0))
	rows := e.commit(acme, turn, key, attempt, at(0), []turnframe.Event{{Case: "booking/1", Type: "booked"}}, []turnframe.OutboxMessage{message(""), message("")}).Outbox
	c := e.claim(at(time.Second), 1, worker)[0]
	is.NoErr(turnframe.CompleteClaim(e.ctx, e.s, c, "ch_1", at(time.Second))) // finished, then
	n, err := e.s.Prune(e.ctx, at(time.Hour))
	is.NoErr(err)  // pruned
	is.Equal(n, 1) // the first row is gone
	for name, subject := range map[string]turnframe.Subject{
		"AKeyNeverUsed":       turnframe.JournalSubject(acme, "never"),
		"AnotherTenantsEntry": turnframe.JournalSubject(globex, key),
		"ARowThatNeverWas":    turnframe.OutboxSubject(acme, e.ids.OutboxID(at(0))),
		"AnotherTenantsRow":   turnframe.OutboxSubject(globex, rows[1].ID),
		"APrunedRow":          turnframe.OutboxSubject(acme, rows[0].ID),
		"ATurnThatNeverWas":   turnframe.TurnSubject(acme, e.ids.TurnID(at(0))),
		"AnotherTenantsTurn":  turnframe.TurnSubject(globex, turn),
	} {
		e.refusedOp("record evidence of "+name, turnframe.ErrNotFound, func() error {
			return e.s.RecordEvidence(e.ctx, turnframe.NewEvidence(subject, "", turnframe.ActorOperator, "", "", "looked", at(2*time.Hour)))
		})
	}
}

// testHistoryTakeOver: a new attempt taking over an entry whose attempt
// died moves it from Executing to Executing; the status is the same, the
// attempt is not, and the trail records the move under the new attempt
// (a renewal by the holder records nothing).
func testHistoryTakeOver(t *testing.T, e *env) {
	is := is.New(t)
	turn, key, first := e.running(acme, "booking/1", at(0))
	subject := turnframe.JournalSubject(acme, key)
	before, n := e.entry(acme, key), len(e.history(subject))

	now := at(lease + time.Second) // the first attempt's lease ended
	second := e.ids.AttemptID(now)
	moved := e.settle(acme, turn, now, take(key, second, first))
	is.Equal(moved.Attempt, second) // taken over

	got := e.history(subject)
	is.Equal(len(got), n+1) // the take-over is one record
	checkHistory(t, got[n:], []turnframe.HistoryRecord{storekit.EntryHistory(before, moved, "", "", now)}, "take-over")
	is.Equal(got[n].From, turnframe.JournalExecuting.String())
	is.Equal(got[n].To, turnframe.JournalExecuting.String())
	is.Equal(got[n].Attempt, second.String()) // under the attempt that took it over
}

// testHistoryRowAttempt: a row's record names its attempt number as the
// trail names attempts (Uncertain.attemptName): none ("") while the row was
// never claimed, then 1, 2, … .
func testHistoryRowAttempt(t *testing.T, e *env) {
	is := is.New(t)
	r := e.enqueue(acme, at(0), message(""))[0]
	c := e.claimOne(at(time.Second), worker)
	is.NoErr(turnframe.RetryClaim(e.ctx, e.s, c, "http.503", at(2*time.Second)))
	e.claimOne(at(2*time.Second), worker)
	hist := e.history(turnframe.OutboxSubject(acme, r.ID))
	is.Equal(len(hist), 4)         // enqueued, claimed, retried, claimed again
	is.Equal(hist[0].Attempt, "")  // enqueued: no attempt yet
	is.Equal(hist[1].Attempt, "1") // the first claim
	is.Equal(hist[2].Attempt, "1") // its retry
	is.Equal(hist[3].Attempt, "2") // the second claim
}

// testHistoryEntryRef: the record of an entry's move keeps what the move
// wrote: its code and the remote's reference, if it gave one; and it names
// the attempt that moved it, none for a reconciliation
// (HistoryRecord.Attempt).
func testHistoryEntryRef(t *testing.T, e *env) {
	is := is.New(t)
	turn, key, attempt := e.running(acme, "booking/1", at(0))
	e.settle(acme, turn, at(time.Second), turnframe.Settlement{Key: key, To: turnframe.JournalOutcomeUnknown, Attempt: attempt, Code: "http.timeout", RemoteRef: "req-1"})
	e.settle(acme, turn, at(2*time.Second), turnframe.Settlement{Key: key, To: turnframe.JournalCommitted, Code: "verified", RemoteRef: "ch_1"})
	hist := e.history(turnframe.JournalSubject(acme, key))
	unknown, committed := hist[len(hist)-2], hist[len(hist)-1]
	is.Equal(unknown.To, turnframe.JournalOutcomeUnknown.String())
	is.Equal(unknown.Code, "http.timeout")
	is.Equal(unknown.RemoteRef, "req-1")        // what the remote said when the call went unanswered
	is.Equal(unknown.Attempt, attempt.String()) // the attempt's own settlement
	is.Equal(committed.To, turnframe.JournalCommitted.String())
	is.Equal(committed.Code, "verified")
	is.Equal(committed.RemoteRef, "ch_1") // the reconciliation's reference
	is.Equal(committed.Attempt, "")       // a reconciliation names no attempt
}

// Pruning never forgets a key: "a journal key's history lives as long as
// the key" (DESIGN.md §5). A command key may be any text, a pruned row's
// id among them: pruning that row drops its own history, never that key's.
func testHistoryPruneKeyLikeRow(t *testing.T, e *env) {
	is := is.New(t)
	row := e.enqueue(acme, at(0), message(""))[0]
	key := turnframe.IdempotencyKey(row.ID.String())
	turn := e.begin(acme, at(0))
	e.admit(acme, turn, at(0), command(key, "booking/9"))
	keyHistory := e.history(turnframe.JournalSubject(acme, key))
	is.True(len(keyHistory) > 0) // the admission is recorded
	c := e.claimOne(at(time.Second), worker)
	is.Equal(c.ID, row.ID)
	is.NoErr(turnframe.CompleteClaim(e.ctx, e.s, c, "", at(time.Second)))

	n, err := e.s.Prune(e.ctx, at(time.Hour))
	is.NoErr(err)
	is.Equal(n, 1)                                                       // the row
	is.Equal(len(e.history(turnframe.OutboxSubject(acme, row.ID))), 0)   // its history went with it
	is.Equal(e.history(turnframe.JournalSubject(acme, key)), keyHistory) // the key's stays
}
