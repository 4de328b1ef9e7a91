package faulttest_test

import (
	"testing"

	"github.com/turnframe/turnframe"
)

// checkTrail checks that the audit trail agrees with the state, whatever
// call failed on the way: the history of every row, of every command text
// planned and of its turn begins with its creation, chains each move from
// where the last one left it, and ends where the row, entry or turn is. A
// move written without its record, or a record written without its move,
// breaks the chain.
func checkTrail(t *testing.T, store turnframe.Store, texts ...string) {
	t.Helper()
	rows, err := store.ListOutbox(bg, turnframe.OutboxFilter{Limit: turnframe.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		chain(t, store, turnframe.OutboxSubject(r.Account, r.ID), r.Status.String())
	}
	turns := map[turnframe.TurnID]bool{}
	for _, text := range texts {
		for _, cmd := range planFor(text).Commands {
			e, err := store.ByKey(bg, faultAccount, cmd.Key)
			if err != nil {
				t.Fatal(err)
			}
			chain(t, store, turnframe.JournalSubject(faultAccount, cmd.Key), e.Status.String())
			turns[e.Turn] = true
		}
	}
	for turn := range turns {
		m, err := store.TurnPhase(bg, faultAccount, turn)
		if err != nil {
			t.Fatal(err)
		}
		chain(t, store, turnframe.TurnSubject(faultAccount, turn), m.Phase.String())
	}
}

// chain checks one subject's history against its status now.
func chain(t *testing.T, store turnframe.Store, subject turnframe.Subject, now string) {
	t.Helper()
	recs, err := store.History(bg, subject, 0, turnframe.MaxLimit)
	if err != nil {
		t.Fatal(err)
	}
	at := ""
	for i, r := range recs {
		if i > 0 && r.Seq <= recs[i-1].Seq {
			t.Errorf("%v %s: record %d has Seq %d after %d", subject.Kind, subject.Ref, i, r.Seq, recs[i-1].Seq)
		}
		if r.From != at {
			t.Errorf("%v %s: record %d moves from %q, but the trail left it at %q: %+v", subject.Kind, subject.Ref, i, r.From, at, recs)
			return
		}
		at = r.To
	}
	if at != now {
		t.Errorf("%v %s is %s, but its trail ends at %q: %+v", subject.Kind, subject.Ref, now, at, recs)
	}
}
