package storetest

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// The inbox: a Write.Begin carrying a channel's message id begins a turn
// once per account and message id. A redelivery of the same message writes
// nothing and reports the turn the first delivery began; another message
// under the id is a conflict (storekit.CheckRedelivery).

func inboxTests() []test {
	return []test{
		{"ABeginKeepsItsMessageIDOnTheTurn", testInboxKeepsID},
		{"ARedeliveredMessageWritesNothingAndReportsTheTurnItBeganAsStoredNow", testInboxRedelivery},
		{"ARedeliveryWritesNothingElseOfItsWriteAndCallsNoApp", testInboxRedeliveryWritesNothing},
		{"AnotherMessageUnderAReceivedMessageIDIsConflictAndChangesNothing", testInboxConflict},
		{"ABeginItsAppRefusedLeavesItsMessageIDUnreceived", testInboxAppRefused},
		{"MessageIDsAreScopedToTheirAccount", testInboxTenancy},
		{"MessageIDsAreComparedByteForByte", testInboxExactIDs},
		{"ConcurrentDeliveriesOfOneMessageIDBeginExactlyOneTurn", testInboxConcurrent},
		{"AMessageIDOutlivesPruning", testInboxPrune},
		{"TurnsWithoutAMessageIDAreNeverRedeliveries", testInboxNoID},
	}
}

// deliverWrite returns the Write that begins a new turn of account for the
// message id in conversation conv with text, at now.
func (e *env) deliverWrite(account turnframe.AccountID, conv turnframe.ConversationID, id turnframe.MessageID, text string, now time.Time) turnframe.Write {
	w := e.beginWrite(account, now)
	w.Begin.Conversation, w.Begin.MessageID, w.Begin.Text = conv, id, text
	return w
}

func testInboxKeepsID(t *testing.T, e *env) {
	is := is.New(t)
	w := e.deliverWrite(acme, e.ids.ConversationID(at(0)), "upd-1", "hello", at(0))
	a := e.apply(w)
	is.Equal(a.Redelivered, nil) // a first delivery
	got, err := e.s.LoadTurn(e.ctx, acme, w.Turn)
	is.NoErr(err)                                         // load turn
	is.Equal(got.MessageID, turnframe.MessageID("upd-1")) // message id kept
}

func testInboxRedelivery(t *testing.T, e *env) {
	is := is.New(t)
	conv := e.ids.ConversationID(at(0))
	first := e.deliverWrite(acme, conv, "upd-1", "hello", at(0))
	e.apply(first)
	e.apply(turnframe.Write{Account: acme, Turn: first.Turn, Now: at(time.Second), Phase: turnframe.PhaseDelivered})

	again := e.deliverWrite(acme, conv, "upd-1", "hello", at(time.Minute))
	e.note(again)
	before := e.snapshot()
	a, err := e.s.Apply(e.ctx, again)
	is.NoErr(err)                                           // a redelivery is no error
	is.True(a.Redelivered != nil)                           // reported as a redelivery
	is.Equal(a.Redelivered.ID, first.Turn)                  // the first delivery's turn
	is.Equal(a.Redelivered.Phase, turnframe.PhaseDelivered) // as stored now
	is.Equal(a.Redelivered.MessageID, turnframe.MessageID("upd-1"))
	is.Equal(a.Redelivered.Text, "hello")
	is.True(a.Redelivered.ReceivedAt.Equal(at(0))) // received when first delivered
	e.unchanged(before, "a redelivery")
	_, err = e.s.LoadTurn(e.ctx, acme, again.Turn)
	is.True(errors.Is(err, turnframe.ErrNotFound)) // the redelivery's turn id was never written
}

func testInboxRedeliveryWritesNothing(t *testing.T, e *env) {
	is := is.New(t)
	conv := e.ids.ConversationID(at(0))
	e.apply(e.deliverWrite(acme, conv, "upd-1", "hello", at(0)))
	again := e.deliverWrite(acme, conv, "upd-1", "hello", at(time.Second))
	key := e.freshKey()
	again.Admit = []turnframe.Command{command(key, "booking/1")}
	app, calls := e.putRows(nil, "redelivered")
	again.App = app
	e.note(again)
	before := e.snapshot()
	a, err := e.s.Apply(e.ctx, again)
	is.NoErr(err)                 // a redelivery is no error
	is.True(a.Redelivered != nil) // reported as a redelivery
	is.Equal(len(a.Admitted), 0)  // nothing admitted
	is.Equal(*calls, 0)           // the app's writes never ran
	e.unchanged(before, "a redelivery carrying more")
	is.Equal(len(e.appRows()), 0) // no app row
}

func testInboxConflict(t *testing.T, e *env) {
	conv := e.ids.ConversationID(at(0))
	e.apply(e.deliverWrite(acme, conv, "upd-1", "hello", at(0)))
	cases := []struct {
		name string
		conv turnframe.ConversationID
		text string
	}{
		{"OtherText", conv, "hello!"},
		{"OtherConversation", e.ids.ConversationID(at(time.Second)), "hello"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e.refused(e.deliverWrite(acme, c.conv, "upd-1", c.text, at(time.Minute)), turnframe.ErrConflict, c.name)
		})
	}
}

// testInboxAppRefused delivers a message whose Write's App returns an
// error: nothing is written, and the message id stays free, so the next
// delivery of it is a first delivery and begins a turn. ReceiveMessage
// refuses a new message over Limits.Text this way, once the store has
// judged it no redelivery.
func testInboxAppRefused(t *testing.T, e *env) {
	is := is.New(t)
	conv := e.ids.ConversationID(at(0))
	refusal := errors.New("over the app's limit")
	w := e.deliverWrite(acme, conv, "upd-1", "hello", at(0))
	app, calls := e.putRows(refusal, "refused")
	w.App = app
	e.refused(w, refusal, "a delivery its App refused")
	is.Equal(*calls, 1) // a first delivery calls the App
	_, err := e.s.LoadTurn(e.ctx, acme, w.Turn)
	is.True(errors.Is(err, turnframe.ErrNotFound)) // its turn was never written
	next := e.deliverWrite(acme, conv, "upd-1", "hello", at(time.Second))
	a := e.apply(next)
	is.Equal(a.Redelivered, nil) // the id was never received: a first delivery
	got, err := e.s.LoadTurn(e.ctx, acme, next.Turn)
	is.NoErr(err)                                         // its own turn
	is.Equal(got.MessageID, turnframe.MessageID("upd-1")) // under the id
}

func testInboxTenancy(t *testing.T, e *env) {
	is := is.New(t)
	conv := e.ids.ConversationID(at(0))
	e.apply(e.deliverWrite(acme, conv, "upd-1", "hello", at(0)))
	w := e.deliverWrite(globex, conv, "upd-1", "hello", at(time.Second))
	a := e.apply(w)
	is.Equal(a.Redelivered, nil) // another account's message id is no redelivery
	got, err := e.s.LoadTurn(e.ctx, globex, w.Turn)
	is.NoErr(err)                 // globex's own turn
	is.Equal(got.Account, globex) // of globex
	// Each account's redelivery finds its own turn, whichever began first.
	for _, account := range []turnframe.AccountID{globex, acme} {
		again := e.apply(e.deliverWrite(account, conv, "upd-1", "hello", at(2*time.Second)))
		is.True(again.Redelivered != nil)                           // a redelivery
		is.Equal(again.Redelivered.Account, account)                // of the account's own turn
		is.Equal(again.Redelivered.ID == w.Turn, account == globex) // globex's is the second turn begun
	}
}

// testInboxExactIDs delivers ids that differ from one another only in
// case, Unicode normalisation, white space at an end, an invisible
// character, or the last byte of the longest id: each is a message of its
// own, begins a turn of its own and is kept as it came, and each is then
// redelivered as itself. A store that folded case, normalised or trimmed
// (a case-insensitive or padded column, a collation that is not
// deterministic) would take one platform's message for another's, and
// answer it with the other's turn.
func testInboxExactIDs(t *testing.T, e *env) {
	is := is.New(t)
	conv := e.ids.ConversationID(at(0))
	longest := strings.Repeat("€", turnframe.MaxMessageIDLen/3)
	ids := []turnframe.MessageID{
		"upd-a", "UPD-A", "Upd-a", // case
		"caf\u00e9", "cafe\u0301", "\ufb01x", "fix", // NFC and NFD, a ligature and its letters
		"upd-b", "upd-b ", " upd-b", "upd-b\u00a0", "upd\u200b-b", // white space, a zero-width space
		turnframe.MessageID(longest), turnframe.MessageID(longest[:len(longest)-1] + "\x80"), // the last byte
	}
	began := make(map[turnframe.MessageID]turnframe.TurnID)
	for i, id := range ids {
		w := e.deliverWrite(acme, conv, id, "hello", at(time.Duration(i)*time.Second))
		a := e.apply(w)
		is.Equal(a.Redelivered, nil) // a message of its own
		got, err := e.s.LoadTurn(e.ctx, acme, w.Turn)
		is.NoErr(err)               // its own turn
		is.Equal(got.MessageID, id) // kept as it came
		began[id] = w.Turn
	}
	for _, id := range ids {
		a := e.apply(e.deliverWrite(acme, conv, id, "hello", at(time.Minute)))
		is.True(a.Redelivered != nil)         // redelivered
		is.Equal(a.Redelivered.ID, began[id]) // as itself
		is.Equal(a.Redelivered.MessageID, id) // under its own id
	}
}

func testInboxConcurrent(t *testing.T, e *env) {
	is := is.New(t)
	const n = 8
	conv := e.ids.ConversationID(at(0))
	writes := make([]turnframe.Write, n)
	for i := range writes {
		writes[i] = e.deliverWrite(acme, conv, "upd-1", "hello", at(time.Duration(i)*time.Millisecond))
		e.note(writes[i])
	}
	results := make([]turnframe.Applied, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range writes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i], errs[i] = e.s.Apply(e.ctx, writes[i])
		}()
	}
	close(start)
	wg.Wait()
	var began []turnframe.TurnID
	for i, err := range errs {
		is.NoErr(err) // every delivery is answered
		if results[i].Redelivered == nil {
			began = append(began, writes[i].Turn)
		}
	}
	is.Equal(len(began), 1) // exactly one delivery began a turn
	for i := range results {
		if r := results[i].Redelivered; r != nil {
			is.Equal(r.ID, began[0]) // every other delivery reports that turn
		}
	}
	turns := 0
	for _, w := range writes {
		if _, err := e.s.LoadTurn(e.ctx, acme, w.Turn); err == nil {
			turns++
		}
	}
	is.Equal(turns, 1) // one turn stored
}

func testInboxPrune(t *testing.T, e *env) {
	is := is.New(t)
	conv := e.ids.ConversationID(at(0))
	first := e.deliverWrite(acme, conv, "upd-1", "hello", at(0))
	e.apply(first)
	turn, key := first.Turn, e.freshKey()
	e.admit(acme, turn, at(time.Second), command(key, "booking/1"))
	attempt := e.execute(acme, turn, key, at(2*time.Second))
	e.commit(acme, turn, key, attempt, at(3*time.Second), nil, []turnframe.OutboxMessage{{Destination: "mail"}})
	e.drainAll(at(4 * time.Second))
	n, err := e.s.Prune(e.ctx, at(time.Hour))
	is.NoErr(err)   // prune
	is.True(n >= 1) // the finished row went
	a := e.apply(e.deliverWrite(acme, conv, "upd-1", "hello", at(2*time.Hour)))
	is.True(a.Redelivered != nil)          // still a redelivery
	is.Equal(a.Redelivered.ID, first.Turn) // of the first turn
}

func testInboxNoID(t *testing.T, e *env) {
	is := is.New(t)
	conv := e.ids.ConversationID(at(0))
	for i := range 3 {
		w := e.deliverWrite(acme, conv, "", "hello", at(time.Duration(i)*time.Second))
		a := e.apply(w)
		is.Equal(a.Redelivered, nil) // each call without an id is a new turn
		_, err := e.s.LoadTurn(e.ctx, acme, w.Turn)
		is.NoErr(err) // stored
	}
}

// drainAll claims every due outbox row at now and completes it.
func (e *env) drainAll(now time.Time) {
	e.t.Helper()
	claims := e.claim(now, turnframe.MaxLimit, "w")
	if len(claims) == 0 {
		e.t.Fatalf("drain at %v: nothing was due", now)
	}
	for _, c := range claims {
		if err := turnframe.CompleteClaim(e.ctx, e.s, c, "", now); err != nil {
			e.t.Fatalf("complete %v: %v", c.ID, err)
		}
	}
}
