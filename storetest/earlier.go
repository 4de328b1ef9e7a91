package storetest

import (
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// What a key had admitted before a Write admits it again (issue 14 item 6):
// Applied.Earlier says, one per Write.Admit, so that Runtime.Plan can tell
// the application truthfully what was already admitted, by which turn, and
// what became of it — an adopted entry included, whose turn the Write moved.

func earlierTests() []test {
	return []test{
		{"AdmitReportsForEachCommandTheEntryItsKeyHadBeforeTheWrite", testEarlier},
	}
}

func testEarlier(t *testing.T, e *env) {
	is := is.New(t)
	// done: committed by its own turn. again: admitted by the turn that
	// admits it again. lost: pending in a turn that was abandoned.
	doneTurn, done, attempt := e.running(acme, "booking/1", at(0))
	e.commit(acme, doneTurn, done, attempt, at(time.Second), []turnframe.Event{{Case: "booking/1", Type: "booked"}}, nil)
	lostTurn := e.begin(acme, at(0))
	lost := e.freshKey()
	e.admit(acme, lostTurn, at(0), command(lost, "booking/3"))
	e.apply(turnframe.Write{Account: acme, Turn: lostTurn, Now: at(time.Second), Phase: turnframe.PhaseAbandoned})
	lostBefore := e.entry(acme, lost)
	turn := e.begin(acme, at(2*time.Second))
	again := e.freshKey()
	e.admit(acme, turn, at(2*time.Second), command(again, "booking/2"))
	doneBefore, againBefore := e.entry(acme, done), e.entry(acme, again)

	fresh := e.freshKey()
	a := e.admit(acme, turn, at(3*time.Second),
		command(fresh, "booking/4"), command(done, "booking/1"), command(again, "booking/2"), command(lost, "booking/3"))

	is.Equal(len(a.Earlier), 4)                                // one per command, in order
	is.True(sameEntry(a.Earlier[0], turnframe.JournalEntry{})) // a key admitted now had none
	is.True(sameEntry(a.Earlier[1], doneBefore))               // another turn's entry, as it was
	is.Equal(a.Earlier[1].Turn, doneTurn)                      // naming the turn that admitted it
	is.True(sameEntry(a.Earlier[2], againBefore))              // this turn's own earlier admission
	is.True(sameEntry(a.Earlier[3], lostBefore))               // the adopted entry as it was before the adoption
	is.Equal(a.Earlier[3].Turn, lostTurn)                      // naming the abandoned turn
	is.Equal(a.Admitted[3].Turn, turn)                         // while the entry now is this turn's
}
