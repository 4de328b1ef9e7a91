package turnframe_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// The helpers of the runtime's tests are prefixed rt: the dispatcher's tests
// share this package.

const (
	rtAccount turnframe.AccountID = "acme"
	rtOther   turnframe.AccountID = "globex"
)

// rtHandler counts its calls per key, keeps the revision each call was
// given, and answers through do, which gets the call's number for its key.
type rtHandler struct {
	mu    sync.Mutex
	calls map[turnframe.IdempotencyKey]int
	revs  map[turnframe.IdempotencyKey][]turnframe.CaseRevision
	atts  map[turnframe.IdempotencyKey][]int
	do    func(ctx context.Context, call turnframe.Call, n int) turnframe.Outcome
}

func rtNewHandler(do func(ctx context.Context, call turnframe.Call, n int) turnframe.Outcome) *rtHandler {
	return &rtHandler{
		calls: make(map[turnframe.IdempotencyKey]int),
		revs:  make(map[turnframe.IdempotencyKey][]turnframe.CaseRevision),
		atts:  make(map[turnframe.IdempotencyKey][]int),
		do:    do,
	}
}

func (h *rtHandler) Handle(ctx context.Context, call turnframe.Call) turnframe.Outcome {
	h.mu.Lock()
	k := call.Command.Key
	h.calls[k]++
	n := h.calls[k]
	h.revs[k] = append(h.revs[k], call.Revision)
	h.atts[k] = append(h.atts[k], call.Attempts)
	h.mu.Unlock()
	return h.do(ctx, call, n)
}

func (h *rtHandler) callsOf(k turnframe.IdempotencyKey) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls[k]
}

func (h *rtHandler) revisionsOf(k turnframe.IdempotencyKey) []turnframe.CaseRevision {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.revs[k])
}

// rtScript answers by command name, as an application's domain would:
//
//	book    commit one event and one outbox message
//	notify  commit one event and two outbox messages (key~1, key~2)
//	bump    commit one event, no message
//	refuse  reject with "sold_out"
//	charge  unknown, with the remote's reference "ref-" + key
func rtScript(_ context.Context, call turnframe.Call, _ int) turnframe.Outcome {
	c := call.Command
	switch c.Name {
	case "book":
		return turnframe.Commit([]turnframe.Event{{Case: c.Case, Type: "booked", Data: c.Payload}},
			turnframe.OutboxMessage{Destination: "payments", Payload: c.Payload})
	case "notify":
		return turnframe.Commit([]turnframe.Event{{Case: c.Case, Type: "notified"}},
			turnframe.OutboxMessage{Destination: "email"}, turnframe.OutboxMessage{Destination: "sms"})
	case "bump":
		return turnframe.Commit([]turnframe.Event{{Case: c.Case, Type: "bumped"}})
	case "refuse":
		return turnframe.Reject("sold_out")
	case "charge":
		return turnframe.Unknown("ref-" + string(c.Key))
	}
	return turnframe.Reject("rt: no script for " + c.Name)
}

func rtCmd(key turnframe.IdempotencyKey, c turnframe.CaseKey, name string) turnframe.Command {
	return turnframe.Command{Key: key, Case: c, Name: name, Payload: []byte(key)}
}

// rtPlanned receives a turn for account and plans cmds.
func rtPlanned(t *testing.T, rt *turnframe.Runtime, account turnframe.AccountID, cmds ...turnframe.Command) turnframe.TurnID {
	t.Helper()
	is := is.New(t)
	is.Helper()
	ctx := context.Background()
	turn, err := rt.Receive(ctx, account, rt.NewConversationID(), "please do it")
	is.NoErr(err) // receive
	_, err = rt.Plan(ctx, account, turn, turnframe.Plan{Commands: cmds})
	is.NoErr(err) // plan
	return turn
}

// rtEventsByKey counts the events of the cases by the key that appended them.
func rtEventsByKey(t *testing.T, store turnframe.Store, account turnframe.AccountID, cases ...turnframe.CaseKey) map[turnframe.IdempotencyKey]int {
	t.Helper()
	is := is.New(t)
	is.Helper()
	out := make(map[turnframe.IdempotencyKey]int)
	for _, c := range cases {
		evs, err := store.EventsSince(context.Background(), account, c, 0, turnframe.MaxLimit)
		is.NoErr(err) // events since
		for _, ev := range evs {
			out[ev.Key]++
		}
	}
	return out
}

// rtOutboxKeys returns the keys of account's outbox rows, sorted.
func rtOutboxKeys(t *testing.T, store turnframe.Store, account turnframe.AccountID) []string {
	t.Helper()
	is := is.New(t)
	is.Helper()
	rows, err := store.ListOutbox(context.Background(), turnframe.OutboxFilter{Account: account, Limit: turnframe.MaxLimit})
	is.NoErr(err) // list outbox
	keys := []string{}
	for _, r := range rows {
		keys = append(keys, string(r.Key))
	}
	slices.Sort(keys)
	return keys
}

func rtEntry(t *testing.T, store turnframe.Store, key turnframe.IdempotencyKey) turnframe.JournalEntry {
	t.Helper()
	is := is.New(t)
	is.Helper()
	e, err := store.ByKey(context.Background(), rtAccount, key)
	is.NoErr(err) // by key
	return e
}

func rtPhase(t *testing.T, store turnframe.Store, turn turnframe.TurnID) turnframe.TurnPhase {
	t.Helper()
	is := is.New(t)
	is.Helper()
	m, err := store.TurnPhase(context.Background(), rtAccount, turn)
	is.NoErr(err) // turn phase
	return m.Phase
}

func rtKinds(r turnframe.ExecuteReport) []turnframe.ResultKind {
	var out []turnframe.ResultKind
	for _, res := range r.Results {
		out = append(out, res.Kind)
	}
	return out
}

func TestRuntimeRunsATurnThroughItsLife(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		rec := &recorder{}
		rt := turnframe.New(store, turnframe.WithObserver(rec))
		h := rtNewHandler(rtScript)

		turn, err := rt.Receive(ctx, rtAccount, rt.NewConversationID(), "book 12A, tell everyone, try 12B")
		is.NoErr(err)                                              // receive
		is.Equal(rtPhase(t, store, turn), turnframe.PhaseReceived) // a received turn

		understanding := &turnframe.Understanding{Questions: []turnframe.UnderstoodQuestion{{Unit: 1, Words: turnframe.WordRange{First: 0, Last: 1, Start: 0, End: 7}}}}
		planned, err := rt.Plan(ctx, rtAccount, turn, turnframe.Plan{
			Understanding: understanding,
			LoadedCases:   []turnframe.CaseKey{"flight/7"},
			Commands: []turnframe.Command{
				rtCmd("k-book", "flight/7", "book"),
				rtCmd("k-notify", "flight/7", "notify"),
				rtCmd("k-refuse", "flight/8", "refuse"),
			},
		})
		is.NoErr(err) // plan
		entries := planned.Entries()
		is.Equal(len(entries), 3)                                      // one entry per command
		is.Equal(entries[0].Status, turnframe.JournalPending)          // admitted pending
		is.Equal(entries[2].Key, turnframe.IdempotencyKey("k-refuse")) // in order
		is.Equal(rtPhase(t, store, turn), turnframe.PhasePlanned)      // a planned turn

		report, err := rt.Execute(ctx, rtAccount, turn, h)
		is.NoErr(err) // execute
		is.Equal(report.Phase, turnframe.PhaseCommitted)
		is.Equal(rtKinds(report), []turnframe.ResultKind{turnframe.ResultCommitted, turnframe.ResultCommitted, turnframe.ResultRejected})
		book, notify, refuse := report.Results[0], report.Results[1], report.Results[2]
		is.True(book.Ran && notify.Ran && refuse.Ran)      // all three ran
		is.Equal(len(book.EventIDs), 1)                    // book's event
		is.Equal(len(book.OutboxIDs), 1)                   // book's row
		is.Equal(len(notify.OutboxIDs), 2)                 // notify's two rows
		is.Equal(refuse.Code, "sold_out")                  // the reject code
		is.Equal(refuse.Status, turnframe.JournalRejected) // rejected in the journal
		is.True(!book.Attempt.IsZero())                    // an attempt id
		is.Equal(rtPhase(t, store, turn), turnframe.PhaseCommitted)

		e := rtEntry(t, store, "k-book")
		is.Equal(e.Status, turnframe.JournalCommitted) // committed in the journal
		is.Equal(e.EventIDs, book.EventIDs)            // with its events
		is.Equal(e.Attempt, book.Attempt)              // by the attempt reported
		is.Equal(e.Attempts, 1)                        // once

		is.Equal(rtOutboxKeys(t, store, rtAccount), []string{"k-book", "k-notify~1", "k-notify~2"}) // key, then key~n for several
		row, err := store.GetOutbox(ctx, book.OutboxIDs[0])
		is.NoErr(err)                         // get outbox
		is.Equal(row.Destination, "payments") // the message's destination
		is.Equal(row.Turn, turn)              // carrying the turn
		is.Equal(rtEventsByKey(t, store, rtAccount, "flight/7", "flight/8"), map[turnframe.IdempotencyKey]int{"k-book": 1, "k-notify": 1})
		rev, err := store.CaseRevision(ctx, rtAccount, "flight/7")
		is.NoErr(err)
		is.Equal(rev, turnframe.CaseRevision(2))                         // two events on the case
		is.Equal(h.revisionsOf("k-notify"), []turnframe.CaseRevision{1}) // notify saw book's event

		is.Equal(len(rec.labels(turnframe.SignalCommandCommitted)), 2)                                                      // two commits
		is.Equal(rec.labels(turnframe.SignalCommandRejected), []turnframe.Labels{{Command: "refuse", Outcome: "sold_out"}}) // one reject

		again, err := rt.Execute(ctx, rtAccount, turn, h)
		is.NoErr(err) // execute again
		is.Equal(rtKinds(again), []turnframe.ResultKind{turnframe.ResultSkipped, turnframe.ResultSkipped, turnframe.ResultSkipped})
		is.Equal(again.Results[0].EventIDs, book.EventIDs)                           // a skipped result says what it had committed
		is.Equal(h.callsOf("k-book")+h.callsOf("k-notify")+h.callsOf("k-refuse"), 3) // nothing ran twice

		is.NoErr(rt.Deliver(ctx, rtAccount, turn, "Booked 12A; 12B is sold out.")) // deliver
		is.Equal(rtPhase(t, store, turn), turnframe.PhaseDelivered)
		replay, err := store.Replay(ctx, rtAccount, turn)
		is.NoErr(err)                                                 // replay
		is.Equal(replay.Response, "Booked 12A; 12B is sold out.")     // the response kept
		is.Equal(replay.Understanding, understanding)                 // the understanding kept
		is.Equal(replay.LoadedCases, []turnframe.CaseKey{"flight/7"}) // the loaded cases kept
	})
}

// rtFixture is acme's planned turn with its one command pending, globex's
// turn with its one command unknown, and a turn nobody has.
type rtFixture struct {
	rt      *turnframe.Runtime
	rec     *turnframe.Recovery
	turn    turnframe.TurnID
	other   turnframe.TurnID
	unknown turnframe.TurnID
}

func TestRuntimeRefusesBadInputAndWritesNothing(t *testing.T) {
	nop := turnframe.HandlerFunc(func(context.Context, turnframe.Call) turnframe.Outcome { return turnframe.Reject("nop") })
	tests := []struct {
		name string
		want error
		do   func(ctx context.Context, f rtFixture) error
	}{
		{"receive with an empty account is invalid", turnframe.ErrInvalid, func(ctx context.Context, f rtFixture) error {
			_, err := f.rt.Receive(ctx, "", f.rt.NewConversationID(), "hi")
			return err
		}},
		{"receive with an account over 128 bytes is invalid", turnframe.ErrInvalid, func(ctx context.Context, f rtFixture) error {
			_, err := f.rt.Receive(ctx, turnframe.AccountID(strings.Repeat("a", 129)), f.rt.NewConversationID(), "hi")
			return err
		}},
		{"receive with a zero conversation is invalid", turnframe.ErrInvalid, func(ctx context.Context, f rtFixture) error {
			_, err := f.rt.Receive(ctx, rtAccount, turnframe.ConversationID{}, "hi")
			return err
		}},
		{"receive with a text over 64 KiB is invalid", turnframe.ErrInvalid, func(ctx context.Context, f rtFixture) error {
			_, err := f.rt.Receive(ctx, rtAccount, f.rt.NewConversationID(), strings.Repeat("x", 64<<10+1))
			return err
		}},
		{"receive with a text that is not UTF-8 is invalid", turnframe.ErrInvalid, func(ctx context.Context, f rtFixture) error {
			_, err := f.rt.Receive(ctx, rtAccount, f.rt.NewConversationID(), "caf\xe9")
			return err
		}},
		{"plan with a zero turn is invalid", turnframe.ErrInvalid, func(ctx context.Context, f rtFixture) error {
			_, err := f.rt.Plan(ctx, rtAccount, turnframe.TurnID{}, turnframe.Plan{})
			return err
		}},
		{"plan with an empty key is invalid", turnframe.ErrInvalid, func(ctx context.Context, f rtFixture) error {
			_, err := f.rt.Plan(ctx, rtAccount, f.turn, turnframe.Plan{Commands: []turnframe.Command{rtCmd("", "flight/7", "book")}})
			return err
		}},
		{"plan with a key twice is invalid", turnframe.ErrInvalid, func(ctx context.Context, f rtFixture) error {
			_, err := f.rt.Plan(ctx, rtAccount, f.turn, turnframe.Plan{Commands: []turnframe.Command{rtCmd("k2", "flight/7", "book"), rtCmd("k2", "flight/7", "book")}})
			return err
		}},
		{"plan with an empty loaded case is invalid", turnframe.ErrInvalid, func(ctx context.Context, f rtFixture) error {
			_, err := f.rt.Plan(ctx, rtAccount, f.turn, turnframe.Plan{LoadedCases: []turnframe.CaseKey{""}})
			return err
		}},
		{"plan of an unknown turn is not found", turnframe.ErrNotFound, func(ctx context.Context, f rtFixture) error {
			_, err := f.rt.Plan(ctx, rtAccount, f.unknown, turnframe.Plan{Commands: []turnframe.Command{rtCmd("k2", "flight/7", "book")}})
			return err
		}},
		{"plan of another tenant's turn is not found", turnframe.ErrNotFound, func(ctx context.Context, f rtFixture) error {
			_, err := f.rt.Plan(ctx, rtAccount, f.other, turnframe.Plan{Commands: []turnframe.Command{rtCmd("k2", "flight/7", "book")}})
			return err
		}},
		{"execute with a nil handler is invalid", turnframe.ErrInvalid, func(ctx context.Context, f rtFixture) error {
			_, err := f.rt.Execute(ctx, rtAccount, f.turn, nil)
			return err
		}},
		{"execute with an empty account is invalid", turnframe.ErrInvalid, func(ctx context.Context, f rtFixture) error {
			_, err := f.rt.Execute(ctx, "", f.turn, nop)
			return err
		}},
		{"execute of an unknown turn is not found", turnframe.ErrNotFound, func(ctx context.Context, f rtFixture) error {
			_, err := f.rt.Execute(ctx, rtAccount, f.unknown, nop)
			return err
		}},
		{"execute of another tenant's turn is not found", turnframe.ErrNotFound, func(ctx context.Context, f rtFixture) error {
			_, err := f.rt.Execute(ctx, rtAccount, f.other, nop)
			return err
		}},
		{"deliver a response that is not UTF-8 is invalid", turnframe.ErrInvalid, func(ctx context.Context, f rtFixture) error {
			return f.rt.Deliver(ctx, rtAccount, f.turn, "\xff")
		}},
		{"deliver to an unknown turn is not found", turnframe.ErrNotFound, func(ctx context.Context, f rtFixture) error {
			return f.rt.Deliver(ctx, rtAccount, f.unknown, "done")
		}},
		{"deliver to another tenant's turn is not found", turnframe.ErrNotFound, func(ctx context.Context, f rtFixture) error {
			return f.rt.Deliver(ctx, rtAccount, f.other, "done")
		}},
		{"abandon with a code over 200 bytes is invalid", turnframe.ErrInvalid, func(ctx context.Context, f rtFixture) error {
			return f.rt.Abandon(ctx, rtAccount, f.turn, strings.Repeat("c", 201))
		}},
		{"abandon another tenant's turn is not found", turnframe.ErrNotFound, func(ctx context.Context, f rtFixture) error {
			return f.rt.Abandon(ctx, rtAccount, f.other, "gone")
		}},
		{"settle with a verdict that is not one is invalid", turnframe.ErrInvalid, func(ctx context.Context, f rtFixture) error {
			return f.rec.Settle(ctx, turnframe.JournalSubject(rtOther, "g1"), turnframe.Decision{Verdict: turnframe.Verdict(9)})
		}},
		{"settle with an empty key is invalid", turnframe.ErrInvalid, func(ctx context.Context, f rtFixture) error {
			return f.rec.Settle(ctx, turnframe.JournalSubject(rtAccount, ""), turnframe.Decision{Verdict: turnframe.VerdictCompleted})
		}},
		{"settle with an empty account is invalid", turnframe.ErrInvalid, func(ctx context.Context, f rtFixture) error {
			return f.rec.Settle(ctx, turnframe.JournalSubject("", "g1"), turnframe.Decision{Verdict: turnframe.VerdictCompleted})
		}},
		{"settle with a code over 200 bytes is invalid", turnframe.ErrInvalid, func(ctx context.Context, f rtFixture) error {
			return f.rec.Settle(ctx, turnframe.JournalSubject(rtOther, "g1"), turnframe.Decision{Verdict: turnframe.VerdictFailed, Code: strings.Repeat("c", 201)})
		}},
		{"settle with an actor that is not one is invalid", turnframe.ErrInvalid, func(ctx context.Context, f rtFixture) error {
			return f.rec.Settle(ctx, turnframe.JournalSubject(rtOther, "g1"), turnframe.Decision{Verdict: turnframe.VerdictCompleted, Actor: "op\x00"})
		}},
		{"settle with a note over 1024 bytes is invalid", turnframe.ErrInvalid, func(ctx context.Context, f rtFixture) error {
			return f.rec.Settle(ctx, turnframe.JournalSubject(rtOther, "g1"), turnframe.Decision{Verdict: turnframe.VerdictCompleted, Note: strings.Repeat("n", 1025)})
		}},
		{"settle an unknown key is not found", turnframe.ErrNotFound, func(ctx context.Context, f rtFixture) error {
			return f.rec.Settle(ctx, turnframe.JournalSubject(rtAccount, "never-used"), turnframe.Decision{Verdict: turnframe.VerdictCompleted})
		}},
		{"settle another tenant's key is not found", turnframe.ErrNotFound, func(ctx context.Context, f rtFixture) error {
			return f.rec.Settle(ctx, turnframe.JournalSubject(rtAccount, "g1"), turnframe.Decision{Verdict: turnframe.VerdictCompleted})
		}},
		{"settle a pending entry is a conflict", turnframe.ErrConflict, func(ctx context.Context, f rtFixture) error {
			return f.rec.Settle(ctx, turnframe.JournalSubject(rtAccount, "k1"), turnframe.Decision{Verdict: turnframe.VerdictFailed})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				ctx := context.Background()
				h := rtNewHandler(rtScript)
				rt := turnframe.New(store)
				f := rtFixture{
					rt:      rt,
					rec:     turnframe.NewRecovery(store),
					turn:    rtPlanned(t, rt, rtAccount, rtCmd("k1", "flight/7", "book")),
					other:   rtPlanned(t, rt, rtOther, rtCmd("g1", "flight/7", "charge")),
					unknown: turnframe.NewIDGenerator().TurnID(time.Now()),
				}
				_, err := rt.Execute(ctx, rtOther, f.other, h)
				is.NoErr(err) // globex's g1 is now unknown
				before := rtSnapshotOf(t, store, f)

				err = tt.do(ctx, f)
				is.True(errors.Is(err, tt.want)) // the error class
				if errors.Is(tt.want, turnframe.ErrInvalid) {
					var ie *turnframe.InvalidError
					is.True(errors.As(err, &ie)) // an InvalidError naming the field
					is.True(ie.Field != "")      // a field
				}
				is.Equal(rtSnapshotOf(t, store, f), before) // nothing written
				is.Equal(h.callsOf("k1"), 0)                // nothing ran
			})
		})
	}
}

// rtSnapshot is everything a refused call could have written.
type rtSnapshot struct {
	markers    []turnframe.TurnPhaseMarker
	entries    []turnframe.JournalEntry
	other      []turnframe.JournalEntry
	replay     turnframe.ReplayRecord
	outbox     []string
	revision   turnframe.CaseRevision
	unfinished int
	history    [][]string // the audit trails of k1 and of globex's g1
}

func rtSnapshotOf(t *testing.T, store turnframe.Store, f rtFixture) rtSnapshot {
	t.Helper()
	is := is.New(t)
	is.Helper()
	ctx := context.Background()
	turn, other := f.turn, f.other
	var s rtSnapshot
	m, err := store.TurnPhase(ctx, rtAccount, turn)
	is.NoErr(err)
	om, err := store.TurnPhase(ctx, rtOther, other)
	is.NoErr(err)
	s.markers = []turnframe.TurnPhaseMarker{m, om}
	s.entries, err = store.ForTurn(ctx, rtAccount, turn)
	is.NoErr(err)
	s.other, err = store.ForTurn(ctx, rtOther, other)
	is.NoErr(err)
	s.replay, err = store.Replay(ctx, rtAccount, turn)
	is.NoErr(err)
	s.outbox = append(rtOutboxKeys(t, store, rtAccount), rtOutboxKeys(t, store, rtOther)...)
	s.revision, err = store.CaseRevision(ctx, rtAccount, "flight/7")
	is.NoErr(err)
	un, err := store.ListUnfinishedTurns(ctx, turnframe.RecoveryScope{}, turnframe.MaxLimit)
	is.NoErr(err)
	s.unfinished = len(un)
	s.history = [][]string{
		histLines(t, store, turnframe.JournalSubject(rtAccount, "k1")),
		histLines(t, store, turnframe.JournalSubject(rtOther, "g1")),
	}
	return s
}
