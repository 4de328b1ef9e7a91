package faulttest_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/memstore"
	"github.com/turnframe/turnframe/sqlitestore"
)

var (
	bg      = context.Background()
	t0      = time.Date(2032, 1, 2, 3, 4, 5, 0, time.UTC)
	badUTF8 = "bad\xffutf8"
)

func long(n int) string { return strings.Repeat("x", n) }

// fixture is a store holding one delivered turn with a committed command
// whose row is claimed, so that every entry point has real ids to be handed
// wrongly.
type fixture struct {
	store   turnframe.Store
	path    string // sqlitestore only
	account turnframe.AccountID
	turn    turnframe.TurnID
	claim   turnframe.Claim
	event   turnframe.EventID
}

type opener struct {
	name string
	open func(t *testing.T) (turnframe.Store, string)
}

var openers = []opener{
	{"memstore", func(t *testing.T) (turnframe.Store, string) { return memstore.New(), "" }},
	{"sqlitestore", func(t *testing.T) (turnframe.Store, string) {
		path := filepath.Join(t.TempDir(), "bad.db")
		s, err := sqlitestore.Open(bg, path)
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		return s, path
	}},
}

func newFixture(t *testing.T, o opener) *fixture {
	t.Helper()
	is := is.New(t)
	store, path := o.open(t)
	t.Cleanup(func() { store.Close() })
	f := &fixture{store: store, path: path, account: "acct"}
	rt := turnframe.New(store, turnframe.WithClock(func() time.Time { return t0 }))
	turn, err := rt.Receive(bg, f.account, rt.NewConversationID(), "hello")
	is.NoErr(err)
	f.turn = turn
	_, err = rt.Plan(bg, f.account, turn, turnframe.Plan{Commands: []turnframe.Command{{Key: "k1", Case: "c1", Name: "book"}}})
	is.NoErr(err)
	_, err = rt.Execute(bg, f.account, turn, turnframe.HandlerFunc(func(ctx context.Context, c turnframe.Call) turnframe.Outcome {
		return turnframe.Commit([]turnframe.Event{{Case: "c1", Type: "booked"}}, turnframe.OutboxMessage{Destination: "pay"})
	}))
	is.NoErr(err)
	is.NoErr(rt.Deliver(bg, f.account, turn, "done"))
	claims, err := store.ClaimDue(bg, t0, 10, "w1")
	is.NoErr(err)
	is.Equal(len(claims), 1)
	f.claim = claims[0]
	e, err := store.ByKey(bg, f.account, "k1")
	is.NoErr(err)
	f.event = e.EventIDs[0]
	return f
}

// call is one call of an entry point.
type call struct {
	name string
	do   func(ctx context.Context, f *fixture) error
}

// badCalls are calls with bad input on Store methods: each must be
// ErrInvalid and write nothing.
func badCalls() []call {
	w := func(mod func(f *fixture, w *turnframe.Write)) func(context.Context, *fixture) error {
		return func(ctx context.Context, f *fixture) error {
			wr := turnframe.Write{Account: f.account, Turn: f.turn, Now: t0}
			mod(f, &wr)
			_, err := f.store.Apply(ctx, wr)
			return err
		}
	}
	settle := func(mod func(s *turnframe.OutboxSettlement)) func(context.Context, *fixture) error {
		return func(ctx context.Context, f *fixture) error {
			s := turnframe.OutboxSettlement{Claim: f.claim, To: turnframe.OutboxCompleted, Now: t0}
			mod(&s)
			res, err := f.store.Settle(ctx, []turnframe.OutboxSettlement{s})
			if err != nil {
				return err
			}
			return res[0]
		}
	}
	return []call{
		{"Apply/EmptyAccount", w(func(f *fixture, w *turnframe.Write) { w.Account = "" })},
		{"Apply/OversizeAccount", w(func(f *fixture, w *turnframe.Write) { w.Account = turnframe.AccountID(long(129)) })},
		{"Apply/NonUTF8Account", w(func(f *fixture, w *turnframe.Write) { w.Account = turnframe.AccountID(badUTF8) })},
		{"Apply/ZeroTurn", w(func(f *fixture, w *turnframe.Write) { w.Turn = turnframe.TurnID{} })},
		{"Apply/ZeroNow", w(func(f *fixture, w *turnframe.Write) { w.Now = time.Time{} })},
		{"Apply/PhaseOutOfRange", w(func(f *fixture, w *turnframe.Write) { w.Phase = 99 })},
		{"Apply/EmptyKey", w(func(f *fixture, w *turnframe.Write) {
			w.Admit = []turnframe.Command{{Key: "", Case: "c", Name: "n"}}
		})},
		{"Apply/OversizeKey", w(func(f *fixture, w *turnframe.Write) {
			w.Admit = []turnframe.Command{{Key: turnframe.IdempotencyKey(long(256)), Case: "c", Name: "n"}}
		})},
		{"Apply/NonUTF8Case", w(func(f *fixture, w *turnframe.Write) {
			w.Admit = []turnframe.Command{{Key: "k9", Case: turnframe.CaseKey(badUTF8), Name: "n"}}
		})},
		{"Apply/OversizeName", w(func(f *fixture, w *turnframe.Write) {
			w.Admit = []turnframe.Command{{Key: "k9", Case: "c", Name: long(201)}}
		})},
		{"Apply/KeyTwice", w(func(f *fixture, w *turnframe.Write) {
			w.Admit = []turnframe.Command{{Key: "k9", Case: "c", Name: "n"}, {Key: "k9", Case: "c", Name: "n"}}
		})},
		{"Apply/ExecutingZeroAttempt", w(func(f *fixture, w *turnframe.Write) {
			w.Settle = []turnframe.Settlement{{Key: "k1", To: turnframe.JournalExecuting}}
		})},
		{"Apply/SettleStatusOutOfRange", w(func(f *fixture, w *turnframe.Write) {
			w.Settle = []turnframe.Settlement{{Key: "k1", To: 42}}
		})},
		{"Apply/OversizeCode", w(func(f *fixture, w *turnframe.Write) {
			w.Settle = []turnframe.Settlement{{Key: "k1", To: turnframe.JournalRejected, Code: long(201)}}
		})},
		{"Apply/OversizeRemoteRef", w(func(f *fixture, w *turnframe.Write) {
			w.Settle = []turnframe.Settlement{{Key: "k1", To: turnframe.JournalOutcomeUnknown, RemoteRef: long(1025)}}
		})},
		{"Apply/EventsWithoutCommit", w(func(f *fixture, w *turnframe.Write) { w.Events = []turnframe.Event{{Case: "c1", Type: "t"}} })},
		{"Apply/OutboxWithoutCommit", w(func(f *fixture, w *turnframe.Write) { w.Outbox = []turnframe.OutboxMessage{{Destination: "pay"}} })},
		{"Apply/EmptyDestination", w(func(f *fixture, w *turnframe.Write) {
			w.Settle = []turnframe.Settlement{{Key: "k1", To: turnframe.JournalCommitted}}
			w.Outbox = []turnframe.OutboxMessage{{Destination: ""}}
		})},
		{"Apply/NonUTF8OrderKey", w(func(f *fixture, w *turnframe.Write) {
			w.Settle = []turnframe.Settlement{{Key: "k1", To: turnframe.JournalCommitted}}
			w.Outbox = []turnframe.OutboxMessage{{Destination: "pay", OrderKey: badUTF8}}
		})},
		{"Apply/EmptyEventType", w(func(f *fixture, w *turnframe.Write) {
			w.Settle = []turnframe.Settlement{{Key: "k1", To: turnframe.JournalCommitted}}
			w.Events = []turnframe.Event{{Case: "c1"}}
		})},
		{"Apply/ExpectBadCase", w(func(f *fixture, w *turnframe.Write) { w.Expect = map[turnframe.CaseKey]turnframe.CaseRevision{"": 1} })},
		{"Apply/BeginOfOtherTurn", w(func(f *fixture, w *turnframe.Write) {
			w.Turn = turnframe.NewIDGenerator().TurnID(t0)
			w.Begin = &turnframe.StoredTurn{Account: f.account, ID: f.turn, Conversation: turnframe.NewIDGenerator().ConversationID(t0)}
		})},
		{"Apply/BeginZeroConversation", w(func(f *fixture, w *turnframe.Write) {
			w.Turn = turnframe.NewIDGenerator().TurnID(t0)
			w.Begin = &turnframe.StoredTurn{Account: f.account, ID: w.Turn}
		})},
		{"Apply/BeginOversizeText", w(func(f *fixture, w *turnframe.Write) {
			w.Turn = turnframe.NewIDGenerator().TurnID(t0)
			w.Begin = &turnframe.StoredTurn{Account: f.account, ID: w.Turn, Conversation: turnframe.NewIDGenerator().ConversationID(t0), Text: long(64<<10 + 1)}
		})},
		{"TurnPhase/EmptyAccount", func(ctx context.Context, f *fixture) error { _, err := f.store.TurnPhase(ctx, "", f.turn); return err }},
		{"TurnPhase/ZeroTurn", func(ctx context.Context, f *fixture) error {
			_, err := f.store.TurnPhase(ctx, f.account, turnframe.TurnID{})
			return err
		}},
		{"LoadTurn/NonUTF8Account", func(ctx context.Context, f *fixture) error {
			_, err := f.store.LoadTurn(ctx, turnframe.AccountID(badUTF8), f.turn)
			return err
		}},
		{"LoadTurn/ZeroTurn", func(ctx context.Context, f *fixture) error {
			_, err := f.store.LoadTurn(ctx, f.account, turnframe.TurnID{})
			return err
		}},
		{"ListUnfinishedTurns/ZeroLimit", func(ctx context.Context, f *fixture) error {
			_, err := f.store.ListUnfinishedTurns(ctx, turnframe.RecoveryScope{}, 0)
			return err
		}},
		{"ListUnfinishedTurns/NegativeLimit", func(ctx context.Context, f *fixture) error {
			_, err := f.store.ListUnfinishedTurns(ctx, turnframe.RecoveryScope{}, -1)
			return err
		}},
		{"ListUnfinishedTurns/OversizeLimit", func(ctx context.Context, f *fixture) error {
			_, err := f.store.ListUnfinishedTurns(ctx, turnframe.RecoveryScope{}, turnframe.MaxLimit+1)
			return err
		}},
		{"ListUnfinishedTurns/OversizeAccount", func(ctx context.Context, f *fixture) error {
			_, err := f.store.ListUnfinishedTurns(ctx, turnframe.RecoveryScope{Account: turnframe.AccountID(long(129))}, 1)
			return err
		}},
		{"ForTurn/ZeroTurn", func(ctx context.Context, f *fixture) error {
			_, err := f.store.ForTurn(ctx, f.account, turnframe.TurnID{})
			return err
		}},
		{"ForTurn/EmptyAccount", func(ctx context.Context, f *fixture) error { _, err := f.store.ForTurn(ctx, "", f.turn); return err }},
		{"ByKey/EmptyKey", func(ctx context.Context, f *fixture) error { _, err := f.store.ByKey(ctx, f.account, ""); return err }},
		{"ByKey/OversizeKey", func(ctx context.Context, f *fixture) error {
			_, err := f.store.ByKey(ctx, f.account, turnframe.IdempotencyKey(long(256)))
			return err
		}},
		{"ByKey/NonUTF8Key", func(ctx context.Context, f *fixture) error {
			_, err := f.store.ByKey(ctx, f.account, turnframe.IdempotencyKey(badUTF8))
			return err
		}},
		{"EventsByID/EmptyAccount", func(ctx context.Context, f *fixture) error {
			_, err := f.store.EventsByID(ctx, "", []turnframe.EventID{f.event})
			return err
		}},
		{"EventsSince/EmptyCase", func(ctx context.Context, f *fixture) error {
			_, err := f.store.EventsSince(ctx, f.account, "", 0, 10)
			return err
		}},
		{"EventsSince/ZeroLimit", func(ctx context.Context, f *fixture) error {
			_, err := f.store.EventsSince(ctx, f.account, "c1", 0, 0)
			return err
		}},
		{"EventsSince/NegativeLimit", func(ctx context.Context, f *fixture) error {
			_, err := f.store.EventsSince(ctx, f.account, "c1", 0, -5)
			return err
		}},
		{"CaseRevision/OversizeCase", func(ctx context.Context, f *fixture) error {
			_, err := f.store.CaseRevision(ctx, f.account, turnframe.CaseKey(long(201)))
			return err
		}},
		{"Replay/ZeroTurn", func(ctx context.Context, f *fixture) error {
			_, err := f.store.Replay(ctx, f.account, turnframe.TurnID{})
			return err
		}},
		{"ClaimDue/ZeroNow", func(ctx context.Context, f *fixture) error {
			_, err := f.store.ClaimDue(ctx, time.Time{}, 1, "w")
			return err
		}},
		{"ClaimDue/ZeroLimit", func(ctx context.Context, f *fixture) error { _, err := f.store.ClaimDue(ctx, t0, 0, "w"); return err }},
		{"ClaimDue/NegativeLimit", func(ctx context.Context, f *fixture) error { _, err := f.store.ClaimDue(ctx, t0, -1, "w"); return err }},
		{"ClaimDue/EmptyWorker", func(ctx context.Context, f *fixture) error { _, err := f.store.ClaimDue(ctx, t0, 1, ""); return err }},
		{"ClaimDue/NonUTF8Worker", func(ctx context.Context, f *fixture) error {
			_, err := f.store.ClaimDue(ctx, t0, 1, badUTF8)
			return err
		}},
		{"ClaimDue/OversizeWorker", func(ctx context.Context, f *fixture) error {
			_, err := f.store.ClaimDue(ctx, t0, 1, long(201))
			return err
		}},
		{"Complete/ZeroClaimID", func(ctx context.Context, f *fixture) error {
			c := f.claim
			c.ID = turnframe.OutboxID{}
			return f.store.Complete(ctx, c, "", t0)
		}},
		{"Complete/EmptyWorker", func(ctx context.Context, f *fixture) error {
			c := f.claim
			c.Worker = ""
			return f.store.Complete(ctx, c, "", t0)
		}},
		{"Complete/ZeroAttempts", func(ctx context.Context, f *fixture) error {
			c := f.claim
			c.Attempts = 0
			return f.store.Complete(ctx, c, "", t0)
		}},
		{"Complete/ZeroNow", func(ctx context.Context, f *fixture) error { return f.store.Complete(ctx, f.claim, "", time.Time{}) }},
		{"Complete/OversizeRef", func(ctx context.Context, f *fixture) error { return f.store.Complete(ctx, f.claim, long(1025), t0) }},
		{"Retry/ZeroAt", func(ctx context.Context, f *fixture) error { return f.store.Retry(ctx, f.claim, "c", time.Time{}) }},
		{"Retry/NonUTF8Code", func(ctx context.Context, f *fixture) error { return f.store.Retry(ctx, f.claim, badUTF8, t0) }},
		{"Fail/OversizeCode", func(ctx context.Context, f *fixture) error { return f.store.Fail(ctx, f.claim, long(201), t0) }},
		{"Fail/ZeroNow", func(ctx context.Context, f *fixture) error { return f.store.Fail(ctx, f.claim, "c", time.Time{}) }},
		{"MarkUnknown/NonUTF8Ref", func(ctx context.Context, f *fixture) error { return f.store.MarkUnknown(ctx, f.claim, badUTF8, t0) }},
		{"Settle/ToDispatching", settle(func(s *turnframe.OutboxSettlement) { s.To = turnframe.OutboxDispatching })},
		{"Settle/ToOutOfRange", settle(func(s *turnframe.OutboxSettlement) { s.To = 77 })},
		{"Settle/RetryZeroAt", settle(func(s *turnframe.OutboxSettlement) { s.To = turnframe.OutboxPending })},
		{"Settle/ZeroNow", settle(func(s *turnframe.OutboxSettlement) { s.Now = time.Time{} })},
		{"Resolve/ZeroID", func(ctx context.Context, f *fixture) error {
			return f.store.Resolve(ctx, turnframe.OutboxID{}, turnframe.VerdictCompleted, "", t0)
		}},
		{"Resolve/Unresolved", func(ctx context.Context, f *fixture) error {
			return f.store.Resolve(ctx, f.claim.ID, turnframe.VerdictUnresolved, "", t0)
		}},
		{"Resolve/VerdictOutOfRange", func(ctx context.Context, f *fixture) error {
			return f.store.Resolve(ctx, f.claim.ID, 9, "", t0)
		}},
		{"Resolve/OversizeCode", func(ctx context.Context, f *fixture) error {
			return f.store.Resolve(ctx, f.claim.ID, turnframe.VerdictFailed, long(201), t0)
		}},
		{"Resolve/ZeroNow", func(ctx context.Context, f *fixture) error {
			return f.store.Resolve(ctx, f.claim.ID, turnframe.VerdictFailed, "", time.Time{})
		}},
		{"Requeue/ZeroID", func(ctx context.Context, f *fixture) error { return f.store.Requeue(ctx, turnframe.OutboxID{}, t0) }},
		{"Requeue/ZeroAt", func(ctx context.Context, f *fixture) error { return f.store.Requeue(ctx, f.claim.ID, time.Time{}) }},
		{"ReleaseExpiredClaims/ZeroTime", func(ctx context.Context, f *fixture) error {
			_, err := f.store.ReleaseExpiredClaims(ctx, time.Time{})
			return err
		}},
		{"GetOutbox/ZeroID", func(ctx context.Context, f *fixture) error {
			_, err := f.store.GetOutbox(ctx, turnframe.OutboxID{})
			return err
		}},
		{"ListOutbox/ZeroLimit", func(ctx context.Context, f *fixture) error {
			_, err := f.store.ListOutbox(ctx, turnframe.OutboxFilter{})
			return err
		}},
		{"ListOutbox/NegativeLimit", func(ctx context.Context, f *fixture) error {
			_, err := f.store.ListOutbox(ctx, turnframe.OutboxFilter{Limit: -3})
			return err
		}},
		{"ListOutbox/StatusOutOfRange", func(ctx context.Context, f *fixture) error {
			_, err := f.store.ListOutbox(ctx, turnframe.OutboxFilter{Status: 42, Limit: 1})
			return err
		}},
		{"ListOutbox/NonUTF8Account", func(ctx context.Context, f *fixture) error {
			_, err := f.store.ListOutbox(ctx, turnframe.OutboxFilter{Account: turnframe.AccountID(badUTF8), Limit: 1})
			return err
		}},
		{"Prune/ZeroTime", func(ctx context.Context, f *fixture) error { _, err := f.store.Prune(ctx, time.Time{}); return err }},
	}
}

// validCalls are correct calls, reads and writes, for the cancelled
// context and the closed store.
func validCalls() []call {
	return []call{
		{"Apply", func(ctx context.Context, f *fixture) error {
			_, err := f.store.Apply(ctx, turnframe.Write{Account: f.account, Turn: f.turn, Now: t0,
				Replay: &turnframe.ReplayRecord{Response: "changed"}})
			return err
		}},
		{"TurnPhase", func(ctx context.Context, f *fixture) error {
			_, err := f.store.TurnPhase(ctx, f.account, f.turn)
			return err
		}},
		{"LoadTurn", func(ctx context.Context, f *fixture) error {
			_, err := f.store.LoadTurn(ctx, f.account, f.turn)
			return err
		}},
		{"ListUnfinishedTurns", func(ctx context.Context, f *fixture) error {
			_, err := f.store.ListUnfinishedTurns(ctx, turnframe.RecoveryScope{}, 10)
			return err
		}},
		{"ForTurn", func(ctx context.Context, f *fixture) error {
			_, err := f.store.ForTurn(ctx, f.account, f.turn)
			return err
		}},
		{"ByKey", func(ctx context.Context, f *fixture) error { _, err := f.store.ByKey(ctx, f.account, "k1"); return err }},
		{"EventsByID", func(ctx context.Context, f *fixture) error {
			_, err := f.store.EventsByID(ctx, f.account, []turnframe.EventID{f.event})
			return err
		}},
		{"EventsSince", func(ctx context.Context, f *fixture) error {
			_, err := f.store.EventsSince(ctx, f.account, "c1", 0, 10)
			return err
		}},
		{"CaseRevision", func(ctx context.Context, f *fixture) error {
			_, err := f.store.CaseRevision(ctx, f.account, "c1")
			return err
		}},
		{"Replay", func(ctx context.Context, f *fixture) error {
			_, err := f.store.Replay(ctx, f.account, f.turn)
			return err
		}},
		{"ClaimDue", func(ctx context.Context, f *fixture) error {
			_, err := f.store.ClaimDue(ctx, t0.Add(time.Hour), 10, "w2")
			return err
		}},
		{"Complete", func(ctx context.Context, f *fixture) error { return f.store.Complete(ctx, f.claim, "ref", t0) }},
		{"Retry", func(ctx context.Context, f *fixture) error { return f.store.Retry(ctx, f.claim, "c", t0) }},
		{"Fail", func(ctx context.Context, f *fixture) error { return f.store.Fail(ctx, f.claim, "c", t0) }},
		{"MarkUnknown", func(ctx context.Context, f *fixture) error { return f.store.MarkUnknown(ctx, f.claim, "r", t0) }},
		{"Settle", func(ctx context.Context, f *fixture) error {
			_, err := f.store.Settle(ctx, []turnframe.OutboxSettlement{{Claim: f.claim, To: turnframe.OutboxCompleted, Now: t0}})
			return err
		}},
		{"Resolve", func(ctx context.Context, f *fixture) error {
			return f.store.Resolve(ctx, f.claim.ID, turnframe.VerdictCompleted, "", t0)
		}},
		{"Requeue", func(ctx context.Context, f *fixture) error { return f.store.Requeue(ctx, f.claim.ID, t0) }},
		{"ReleaseExpiredClaims", func(ctx context.Context, f *fixture) error {
			_, err := f.store.ReleaseExpiredClaims(ctx, t0.Add(time.Hour))
			return err
		}},
		{"GetOutbox", func(ctx context.Context, f *fixture) error { _, err := f.store.GetOutbox(ctx, f.claim.ID); return err }},
		{"ListOutbox", func(ctx context.Context, f *fixture) error {
			_, err := f.store.ListOutbox(ctx, turnframe.OutboxFilter{Limit: 10})
			return err
		}},
		{"Prune", func(ctx context.Context, f *fixture) error {
			_, err := f.store.Prune(ctx, t0.Add(time.Hour))
			return err
		}},
	}
}

// safely runs do and turns a panic into an error.
func safely(do func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return do()
}

// fileState hashes the database file and its WAL: what a call that writes
// nothing must leave as it was.
func fileState(t *testing.T, path string) string {
	t.Helper()
	if path == "" {
		return ""
	}
	h := sha256.New()
	for _, p := range []string{path, path + "-wal"} {
		b, err := os.ReadFile(p)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		fmt.Fprintf(h, "%s:%d:", filepath.Base(p), len(b))
		h.Write(b)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

// dumpStore lists everything a store holds through its API, for stores
// without a file.
func dumpStore(t *testing.T, f *fixture) string {
	t.Helper()
	var b strings.Builder
	rows, err := f.store.ListOutbox(bg, turnframe.OutboxFilter{Limit: 100})
	fmt.Fprintf(&b, "%+v %v\n", rows, err)
	e, err := f.store.ForTurn(bg, f.account, f.turn)
	fmt.Fprintf(&b, "%+v %v\n", e, err)
	st, err := f.store.LoadTurn(bg, f.account, f.turn)
	fmt.Fprintf(&b, "%+v %v\n", st, err)
	rp, err := f.store.Replay(bg, f.account, f.turn)
	fmt.Fprintf(&b, "%+v %v\n", rp.Response, err)
	ev, err := f.store.EventsSince(bg, f.account, "c1", 0, 100)
	fmt.Fprintf(&b, "%+v %v\n", ev, err)
	return b.String()
}

// TestStoreBadInput: every Store method given bad input says ErrInvalid,
// does not panic, and writes nothing: for sqlitestore the file and its WAL
// are byte for byte as they were.
func TestStoreBadInput(t *testing.T) {
	for _, o := range openers {
		t.Run(o.name, func(t *testing.T) {
			f := newFixture(t, o)
			before, dump := fileState(t, f.path), dumpStore(t, f)
			for _, c := range badCalls() {
				t.Run(c.name, func(t *testing.T) {
					is := is.New(t)
					err := safely(func() error { return c.do(bg, f) })
					is.True(err != nil)                           // bad input is refused
					is.True(errors.Is(err, turnframe.ErrInvalid)) // as ErrInvalid
					var ie *turnframe.InvalidError
					is.True(errors.As(err, &ie) && ie.Field != "") // naming the field
				})
			}
			is := is.New(t)
			is.Equal(fileState(t, f.path), before) // the file is unchanged
			is.Equal(dumpStore(t, f), dump)        // the store holds what it held
		})
	}
}

// TestStoreCancelledContext: a correct call under a cancelled context says
// context.Canceled and writes nothing, on both stores.
func TestStoreCancelledContext(t *testing.T) {
	cancelled, cancel := context.WithCancel(bg)
	cancel()
	for _, o := range openers {
		t.Run(o.name, func(t *testing.T) {
			f := newFixture(t, o)
			before, dump := fileState(t, f.path), dumpStore(t, f)
			for _, c := range validCalls() {
				t.Run(c.name, func(t *testing.T) {
					is := is.New(t)
					err := safely(func() error { return c.do(cancelled, f) })
					is.True(errors.Is(err, context.Canceled)) // the context's error, not a panic
				})
			}
			is := is.New(t)
			is.Equal(fileState(t, f.path), before) // the file is unchanged
			is.Equal(dumpStore(t, f), dump)        // the store holds what it held
		})
	}
}

// TestStoreClosed: after Close every method, Close included, says
// ErrClosed and does not panic.
func TestStoreClosed(t *testing.T) {
	for _, o := range openers {
		t.Run(o.name, func(t *testing.T) {
			f := newFixture(t, o)
			is.New(t).NoErr(f.store.Close())
			calls := append(validCalls(), call{"Close", func(context.Context, *fixture) error { return f.store.Close() }})
			for _, c := range calls {
				t.Run(c.name, func(t *testing.T) {
					is := is.New(t)
					err := safely(func() error { return c.do(bg, f) })
					is.True(errors.Is(err, turnframe.ErrClosed)) // closed
				})
			}
		})
	}
}
