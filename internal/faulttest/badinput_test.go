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

// fixture is a store holding, so that every entry point has real ids to be
// handed wrongly and real rows and entries to be refused on:
//
//   - turn: delivered; its commands k1 and k2 committed, one row each: k1's
//     claimed by w1 under an hour's lease (claim), k2's claimed and marked
//     outcome unknown (unknownRow);
//   - planned: planned, with p1 pending and x1 executing under attempt
//     xAttempt, leased for an hour from t0;
//   - unknownTurn: its command u1 outcome unknown (attempt uAttempt);
//   - abandoned: abandoned, its command v1 outcome unknown;
//   - intervention: its command n1 escalated to needs intervention by the
//     policy (attempt nAttempt), and n2 committed with one row, claimed,
//     marked unknown and escalated (interventionRow).
type fixture struct {
	store      turnframe.Store
	path       string // sqlitestore only
	account    turnframe.AccountID
	turn       turnframe.TurnID
	claim      turnframe.Claim
	unknownRow turnframe.OutboxID
	event      turnframe.EventID

	planned     turnframe.TurnID
	xAttempt    turnframe.AttemptID
	unknownTurn turnframe.TurnID
	uAttempt    turnframe.AttemptID
	abandoned   turnframe.TurnID

	intervention    turnframe.TurnID
	nAttempt        turnframe.AttemptID
	interventionRow turnframe.OutboxID
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

// fixtureLease is how long the fixture's claim and attempts hold: longer
// than any test runs at t0.
const fixtureLease = time.Hour

func newFixture(t *testing.T, o opener) *fixture {
	t.Helper()
	is := is.New(t)
	store, path := o.open(t)
	t.Cleanup(func() { store.Close() })
	f := &fixture{store: store, path: path, account: "acct"}
	ids := turnframe.NewIDGenerator()
	rt := turnframe.New(store, turnframe.WithClock(func() time.Time { return t0 }))
	plan := func(text string, keys ...turnframe.IdempotencyKey) turnframe.TurnID {
		turn, err := rt.Receive(bg, f.account, rt.NewConversationID(), text)
		is.NoErr(err)
		var cmds []turnframe.Command
		for _, k := range keys {
			cmds = append(cmds, turnframe.Command{Key: k, Case: "c1", Name: "book"})
		}
		_, err = rt.Plan(bg, f.account, turn, turnframe.Plan{Commands: cmds})
		is.NoErr(err)
		return turn
	}
	take := func(turn turnframe.TurnID, key turnframe.IdempotencyKey) turnframe.AttemptID {
		att := ids.AttemptID(t0)
		_, err := store.Apply(bg, turnframe.Write{Account: f.account, Turn: turn, Now: t0, Advance: turnframe.PhaseExecuting,
			Settle: []turnframe.Settlement{{Key: key, To: turnframe.JournalExecuting, Attempt: att, Lease: fixtureLease}}})
		is.NoErr(err)
		return att
	}
	unknown := func(turn turnframe.TurnID, key turnframe.IdempotencyKey, att turnframe.AttemptID) {
		_, err := store.Apply(bg, turnframe.Write{Account: f.account, Turn: turn, Now: t0,
			Settle: []turnframe.Settlement{{Key: key, To: turnframe.JournalOutcomeUnknown, Attempt: att, RemoteRef: "ref"}}})
		is.NoErr(err)
	}

	f.turn = plan("hello", "k1", "k2")
	_, err := rt.Execute(bg, f.account, f.turn, turnframe.HandlerFunc(func(ctx context.Context, c turnframe.Call) turnframe.Outcome {
		return turnframe.Commit([]turnframe.Event{{Case: "c1", Type: "booked"}}, turnframe.OutboxMessage{Destination: "pay"})
	}))
	is.NoErr(err)
	is.NoErr(rt.Deliver(bg, f.account, f.turn, "done"))
	claims, err := store.ClaimDue(bg, t0, 10, "w1", fixtureLease)
	is.NoErr(err)
	is.Equal(len(claims), 2) // k1's row and k2's
	f.claim = claims[0]
	is.NoErr(turnframe.MarkClaimUnknown(bg, store, claims[1], "ref", t0))
	f.unknownRow = claims[1].ID
	e, err := store.ByKey(bg, f.account, "k1")
	is.NoErr(err)
	f.event = e.EventIDs[0]

	f.planned = plan("planned", "p1", "x1")
	f.xAttempt = take(f.planned, "x1")
	f.unknownTurn = plan("unknown", "u1")
	f.uAttempt = take(f.unknownTurn, "u1")
	unknown(f.unknownTurn, "u1", f.uAttempt)
	f.abandoned = plan("abandoned", "v1")
	unknown(f.abandoned, "v1", take(f.abandoned, "v1"))
	is.NoErr(rt.Abandon(bg, f.account, f.abandoned, "gone"))

	f.intervention = plan("intervention", "n1", "n2")
	f.nAttempt = take(f.intervention, "n1")
	unknown(f.intervention, "n1", f.nAttempt)
	_, err = store.Apply(bg, turnframe.Write{Account: f.account, Turn: f.intervention, Now: t0, Actor: turnframe.ActorPolicy,
		Settle: []turnframe.Settlement{{Key: "n1", To: turnframe.JournalNeedsIntervention, Code: turnframe.CodeNoSafeResolution}}})
	is.NoErr(err)
	n2 := take(f.intervention, "n2")
	_, err = store.Apply(bg, turnframe.Write{Account: f.account, Turn: f.intervention, Now: t0,
		Settle: []turnframe.Settlement{{Key: "n2", To: turnframe.JournalCommitted, Attempt: n2}},
		Events: []turnframe.Event{{Case: "c1", Type: "booked"}}, Outbox: []turnframe.OutboxMessage{{Destination: "pay"}}})
	is.NoErr(err)
	claims, err = store.ClaimDue(bg, t0, 10, "w1", fixtureLease)
	is.NoErr(err)
	is.Equal(len(claims), 1) // n2's row
	is.NoErr(turnframe.MarkClaimUnknown(bg, store, claims[0], "ref", t0))
	f.interventionRow = claims[0].ID
	is.NoErr(store.Resolve(bg, turnframe.Resolution{ID: f.interventionRow, Verdict: turnframe.VerdictEscalate,
		Code: turnframe.CodeNoSafeResolution, Actor: turnframe.ActorPolicy, Now: t0}))
	return f
}

// badTimes are times no store takes: before MinTime (the Unix epoch itself
// among them, which SQLite would read back as no time; a nanosecond before
// MinTime, which a store that truncated before it checked would take) and
// after MaxTime.
var badTimes = []struct {
	name string
	t    time.Time
}{
	{"Epoch", time.Unix(0, 0).UTC()},
	{"MinTimeLess1ns", turnframe.MinTime.Add(-time.Nanosecond)},
	{"Before1970", time.Date(1969, 7, 20, 20, 17, 0, 0, time.UTC)},
	{"MaxTimePlus1ns", turnframe.MaxTime.Add(time.Nanosecond)},
	{"Year10000", time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
}

// badKeys are keys no command is admitted under: a control character, an
// interior tab, white space at either end (HTTP would trim it), the row-key
// separator. A release at schema 1 admitted them, so calls that address an
// admitted command take them (legacyKeyCalls); only a NUL (storedBadKeys)
// is refused everywhere.
var badKeys = append([]struct {
	name string
	key  turnframe.IdempotencyKey
}{
	{"ControlChar", "k\x01"},
	{"InteriorTab", "k\t1"},
	{"Newline", "k1\n"},
	{"LeadingSpace", " k1"},
	{"TrailingSpace", "k1 "},
	{"TrailingNBSP", "k1\u00a0"},
	{"Tilde", "k~1"},
}, storedBadKeys...)

// storedBadKeys are keys no store holds, refused by every call.
var storedBadKeys = []struct {
	name string
	key  turnframe.IdempotencyKey
}{
	{"NUL", "k\x001"},
}

// call is one call of an entry point.
type call struct {
	name string
	do   func(ctx context.Context, f *fixture) error
	// field, when not empty, is the field the *InvalidError must name.
	field string
}

// badCalls are calls with bad input on Store methods: each must be
// ErrInvalid and write nothing.
func badCalls() []call {
	return append(badCallsBefore(), badCallsOfTheNewContract()...)
}

// badCallsOfTheNewContract are the bad inputs of issues 11 and 12: times out
// of range at every method that takes one, keys a remote could not tell
// apart or that could collide with a row key, leases that are none, and
// writes that contradict themselves.
func badCallsOfTheNewContract() []call {
	var calls []call
	add := func(name, field string, do func(ctx context.Context, f *fixture) error) {
		calls = append(calls, call{name: name, field: field, do: do})
	}
	apply := func(ctx context.Context, f *fixture, w turnframe.Write) error {
		if w.Account == "" {
			w.Account = f.account
		}
		if w.Turn.IsZero() {
			w.Turn = f.turn
		}
		if w.Now.IsZero() {
			w.Now = t0
		}
		_, err := f.store.Apply(ctx, w)
		return err
	}
	settle := func(ctx context.Context, f *fixture, s turnframe.OutboxSettlement) error {
		res, err := f.store.Settle(ctx, []turnframe.OutboxSettlement{s})
		if err != nil {
			return err
		}
		return res[0]
	}
	newTurn := turnframe.NewIDGenerator().TurnID(t0)
	conv := turnframe.NewIDGenerator().ConversationID(t0)
	for _, bt := range badTimes {
		at := bt.t
		add("Apply/Now"+bt.name, "write.now", func(ctx context.Context, f *fixture) error {
			return apply(ctx, f, turnframe.Write{Now: at, Admit: []turnframe.Command{{Key: "k9", Case: "c1", Name: "n"}}})
		})
		add("Apply/ReceivedAt"+bt.name, "write.begin.received_at", func(ctx context.Context, f *fixture) error {
			return apply(ctx, f, turnframe.Write{Turn: newTurn, Begin: &turnframe.StoredTurn{Account: f.account, ID: newTurn, Conversation: conv, ReceivedAt: at}})
		})
		add("Apply/NotBefore"+bt.name, "write.outbox[0].not_before", func(ctx context.Context, f *fixture) error {
			return apply(ctx, f, turnframe.Write{Turn: f.planned, Settle: []turnframe.Settlement{{Key: "x1", To: turnframe.JournalCommitted, Attempt: f.xAttempt}},
				Outbox: []turnframe.OutboxMessage{{Destination: "pay", NotBefore: at}}})
		})
		add("ClaimDue/Now"+bt.name, "now", func(ctx context.Context, f *fixture) error {
			_, err := f.store.ClaimDue(ctx, at, 10, "w2", time.Nanosecond)
			return err
		})
		add("ExtendClaims/Now"+bt.name, "now", func(ctx context.Context, f *fixture) error {
			_, err := f.store.ExtendClaims(ctx, []turnframe.Claim{f.claim}, at, time.Nanosecond)
			return err
		})
		add("Complete/Now"+bt.name, "now", func(ctx context.Context, f *fixture) error {
			return turnframe.CompleteClaim(ctx, f.store, f.claim, "ref", at)
		})
		add("Retry/At"+bt.name, "retry_at", func(ctx context.Context, f *fixture) error {
			return turnframe.RetryClaim(ctx, f.store, f.claim, "c", at)
		})
		add("Fail/Now"+bt.name, "now", func(ctx context.Context, f *fixture) error {
			return turnframe.FailClaim(ctx, f.store, f.claim, "c", at)
		})
		add("MarkUnknown/Now"+bt.name, "now", func(ctx context.Context, f *fixture) error {
			return turnframe.MarkClaimUnknown(ctx, f.store, f.claim, "r", at)
		})
		add("Settle/Now"+bt.name, "now", func(ctx context.Context, f *fixture) error {
			return settle(ctx, f, turnframe.OutboxSettlement{Claim: f.claim, To: turnframe.OutboxCompleted, Now: at})
		})
		add("Settle/RetryAt"+bt.name, "retry_at", func(ctx context.Context, f *fixture) error {
			return settle(ctx, f, turnframe.OutboxSettlement{Claim: f.claim, To: turnframe.OutboxPending, Code: "c", RetryAt: at, Now: t0})
		})
		add("Resolve/Now"+bt.name, "now", func(ctx context.Context, f *fixture) error {
			return f.store.Resolve(ctx, turnframe.Resolution{ID: f.unknownRow, Verdict: turnframe.VerdictCompleted, Now: at})
		})
		add("Requeue/At"+bt.name, "at", func(ctx context.Context, f *fixture) error { return f.store.Requeue(ctx, f.unknownRow, 0, at) })
		add("ExpireClaims/Now"+bt.name, "now", func(ctx context.Context, f *fixture) error {
			_, err := f.store.ExpireClaims(ctx, at)
			return err
		})
		add("RecordEvidence/At"+bt.name, "at", func(ctx context.Context, f *fixture) error {
			return f.store.RecordEvidence(ctx, turnframe.NewEvidence(turnframe.OutboxSubject(f.account, f.unknownRow), "", turnframe.ActorPolicy, "", "", "", at))
		})
		add("ReleaseClaim/Now"+bt.name, "now", func(ctx context.Context, f *fixture) error { return f.store.ReleaseClaim(ctx, f.claim.ID, 0, at) })
		add("Prune/Before"+bt.name, "finished_before", func(ctx context.Context, f *fixture) error {
			_, err := f.store.Prune(ctx, at)
			return err
		})
		add("ListUnfinishedTurns/UpdatedBefore"+bt.name, "updated_before", func(ctx context.Context, f *fixture) error {
			_, err := f.store.ListUnfinishedTurns(ctx, turnframe.RecoveryScope{UpdatedBefore: at}, 10)
			return err
		})
	}
	for _, bk := range badKeys {
		key := bk.key
		add("Apply/AdmitKey"+bk.name, "write.admit[0].key", func(ctx context.Context, f *fixture) error {
			return apply(ctx, f, turnframe.Write{Turn: f.planned, Admit: []turnframe.Command{{Key: key, Case: "c1", Name: "n"}}})
		})
	}
	for _, bk := range storedBadKeys {
		key := bk.key
		add("Apply/SettleKey"+bk.name, "write.settle[0].key", func(ctx context.Context, f *fixture) error {
			return apply(ctx, f, turnframe.Write{Turn: f.unknownTurn, Settle: []turnframe.Settlement{{Key: key, To: turnframe.JournalCommitted}}})
		})
		add("ByKey/Key"+bk.name, "key", func(ctx context.Context, f *fixture) error {
			_, err := f.store.ByKey(ctx, f.account, key)
			return err
		})
	}
	add("Apply/SettleFromNoStatus", "write.settle[0].from", func(ctx context.Context, f *fixture) error {
		return apply(ctx, f, turnframe.Write{Turn: f.unknownTurn,
			Settle: []turnframe.Settlement{{Key: "u1", To: turnframe.JournalCommitted, From: turnframe.JournalAwaitingApproval + 1}}})
	})
	take := func(f *fixture, lease time.Duration) turnframe.Settlement {
		return turnframe.Settlement{Key: "p1", To: turnframe.JournalExecuting, Attempt: turnframe.NewIDGenerator().AttemptID(t0), Lease: lease}
	}
	for _, tc := range []struct {
		name, field string
		w           func(f *fixture) turnframe.Write
	}{
		{"Apply/TakeWithoutLease", "write.settle[0].lease", func(f *fixture) turnframe.Write {
			return turnframe.Write{Turn: f.planned, Settle: []turnframe.Settlement{take(f, 0)}}
		}},
		{"Apply/TakeWithNegativeLease", "write.settle[0].lease", func(f *fixture) turnframe.Write {
			return turnframe.Write{Turn: f.planned, Settle: []turnframe.Settlement{take(f, -time.Second)}}
		}},
		{"Apply/TakeLeasePastMaxTime", "write.settle[0].lease", func(f *fixture) turnframe.Write {
			return turnframe.Write{Turn: f.planned, Now: turnframe.MaxTime.Add(-time.Second), Settle: []turnframe.Settlement{take(f, time.Hour)}}
		}},
		{"Apply/PhaseAndAdvance", "write.advance", func(f *fixture) turnframe.Write {
			return turnframe.Write{Turn: f.planned, Phase: turnframe.PhaseExecuting, Advance: turnframe.PhaseExecuting}
		}},
		{"Apply/AdvanceOutOfRange", "write.advance", func(f *fixture) turnframe.Write {
			return turnframe.Write{Turn: f.planned, Advance: 42}
		}},
		{"Apply/ReplayBasisOutOfRange", "write.replay.understanding.questions[0].basis", func(f *fixture) turnframe.Write {
			return turnframe.Write{Turn: f.planned, Replay: &turnframe.ReplayRecord{Understanding: &turnframe.Understanding{
				Questions: []turnframe.UnderstoodQuestion{{Basis: 3}}}}}
		}},
		{"Apply/ReplayBasisFarOutOfRange", "write.replay.understanding.questions[1].basis", func(f *fixture) turnframe.Write {
			return turnframe.Write{Turn: f.planned, Replay: &turnframe.ReplayRecord{Understanding: &turnframe.Understanding{
				Questions: []turnframe.UnderstoodQuestion{{Basis: turnframe.BasisGeneralDomainKnowledge}, {Basis: 255}}}}}
		}},
		{"Apply/ReplayBadLoadedCase", "write.replay.loaded_cases[0].case", func(f *fixture) turnframe.Write {
			return turnframe.Write{Turn: f.planned, Replay: &turnframe.ReplayRecord{LoadedCases: []turnframe.CaseKey{""}}}
		}},
		{"Apply/AbandonAndResend", "write.settle[0].to", func(f *fixture) turnframe.Write {
			return turnframe.Write{Turn: f.unknownTurn, Phase: turnframe.PhaseAbandoned, Settle: []turnframe.Settlement{{Key: "u1", To: turnframe.JournalPending}}}
		}},
		{"Apply/AdvanceAbandonAndResend", "write.settle[0].to", func(f *fixture) turnframe.Write {
			return turnframe.Write{Turn: f.unknownTurn, Advance: turnframe.PhaseAbandoned, Settle: []turnframe.Settlement{{Key: "u1", To: turnframe.JournalPending}}}
		}},
		{"Apply/AbandonAndTake", "write.settle[0].to", func(f *fixture) turnframe.Write {
			return turnframe.Write{Turn: f.planned, Phase: turnframe.PhaseAbandoned, Settle: []turnframe.Settlement{take(f, time.Minute)}}
		}},
	} {
		add(tc.name, tc.field, func(ctx context.Context, f *fixture) error { return apply(ctx, f, tc.w(f)) })
	}
	for _, tc := range []struct {
		name  string
		lease time.Duration
		now   time.Time
	}{
		{"ZeroLease", 0, t0},
		{"NegativeLease", -time.Minute, t0},
		{"LeasePastMaxTime", time.Hour, turnframe.MaxTime.Add(-time.Second)},
	} {
		add("ClaimDue/"+tc.name, "lease", func(ctx context.Context, f *fixture) error {
			_, err := f.store.ClaimDue(ctx, tc.now, 10, "w2", tc.lease)
			return err
		})
		add("ExtendClaims/"+tc.name, "lease", func(ctx context.Context, f *fixture) error {
			_, err := f.store.ExtendClaims(ctx, []turnframe.Claim{f.claim}, tc.now, tc.lease)
			return err
		})
	}
	for _, tc := range []struct {
		name, field string
		mod         func(c *turnframe.Claim)
	}{
		{"ZeroID", "claims[1].id", func(c *turnframe.Claim) { c.ID = turnframe.OutboxID{} }},
		{"EmptyWorker", "claims[1].worker", func(c *turnframe.Claim) { c.Worker = "" }},
		{"ZeroAttempts", "claims[1].attempts", func(c *turnframe.Claim) { c.Attempts = 0 }},
	} {
		// The first claim is good: one bad claim refuses the whole call.
		add("ExtendClaims/"+tc.name, tc.field, func(ctx context.Context, f *fixture) error {
			bad := f.claim
			tc.mod(&bad)
			_, err := f.store.ExtendClaims(ctx, []turnframe.Claim{f.claim, bad}, t0, time.Minute)
			return err
		})
	}
	add("ReleaseClaim/ZeroID", "id", func(ctx context.Context, f *fixture) error {
		return f.store.ReleaseClaim(ctx, turnframe.OutboxID{}, 0, t0)
	})
	add("ListUnfinishedTurns/CursorOtherAccount", "account", func(ctx context.Context, f *fixture) error {
		_, err := f.store.ListUnfinishedTurns(ctx, turnframe.RecoveryScope{Account: " \xff", After: f.turn}, 10)
		return err
	})
	return append(calls, badCallsOfIssue13()...)
}

// badCallsOfIssue13 are the bad inputs of the audit trail and of
// intervention: a resolution's actor and note, a write's actor and note,
// history reads and evidence records.
func badCallsOfIssue13() []call {
	var calls []call
	add := func(name, field string, do func(ctx context.Context, f *fixture) error) {
		calls = append(calls, call{name: name, field: field, do: do})
	}
	resolve := func(mod func(r *turnframe.Resolution)) func(ctx context.Context, f *fixture) error {
		return func(ctx context.Context, f *fixture) error {
			res := turnframe.Resolution{ID: f.unknownRow, Verdict: turnframe.VerdictEscalate, Actor: turnframe.ActorPolicy, Now: t0}
			mod(&res)
			return f.store.Resolve(ctx, res)
		}
	}
	add("Resolve/ActorControlChar", "actor", resolve(func(r *turnframe.Resolution) { r.Actor = "policy\n" }))
	add("Resolve/ActorOversize", "actor", resolve(func(r *turnframe.Resolution) { r.Actor = turnframe.Actor(long(201)) }))
	add("Resolve/NoteOversize", "note", resolve(func(r *turnframe.Resolution) { r.Note = long(turnframe.MaxNoteLen + 1) }))
	add("Resolve/RemoteRefOversize", "remote_ref", resolve(func(r *turnframe.Resolution) { r.RemoteRef = long(turnframe.MaxRemoteRefLen + 1) }))
	add("Resolve/VerdictPastEscalate", "verdict", resolve(func(r *turnframe.Resolution) { r.Verdict = turnframe.VerdictEscalate + 1 }))
	write := func(mod func(w *turnframe.Write)) func(ctx context.Context, f *fixture) error {
		return func(ctx context.Context, f *fixture) error {
			w := turnframe.Write{Account: f.account, Turn: f.unknownTurn, Now: t0, Actor: turnframe.ActorOperator,
				Settle: []turnframe.Settlement{{Key: "u1", To: turnframe.JournalNeedsIntervention}}}
			mod(&w)
			_, err := f.store.Apply(ctx, w)
			return err
		}
	}
	add("Apply/ActorControlChar", "write.actor", write(func(w *turnframe.Write) { w.Actor = "op\x00" }))
	add("Apply/ActorNonUTF8", "write.actor", write(func(w *turnframe.Write) { w.Actor = turnframe.Actor(badUTF8) }))
	add("Apply/NoteOversize", "write.note", write(func(w *turnframe.Write) { w.Note = long(turnframe.MaxNoteLen + 1) }))
	subject := func(f *fixture) turnframe.Subject { return turnframe.TurnSubject(f.account, f.turn) }
	for _, tc := range []struct {
		name, field string
		mod         func(s *turnframe.Subject)
	}{
		{"NoKind", "subject.kind", func(s *turnframe.Subject) { s.Kind = 0 }},
		{"KindOutOfRange", "subject.kind", func(s *turnframe.Subject) { s.Kind = 9 }},
		{"EmptyAccount", "subject.account", func(s *turnframe.Subject) { s.Account = "" }},
		{"EmptyRef", "subject.ref", func(s *turnframe.Subject) { s.Ref = "" }},
		{"NonUTF8Ref", "subject.ref", func(s *turnframe.Subject) { s.Ref = badUTF8 }},
	} {
		add("History/Subject"+tc.name, tc.field, func(ctx context.Context, f *fixture) error {
			sub := subject(f)
			tc.mod(&sub)
			_, err := f.store.History(ctx, sub, 0, 10)
			return err
		})
		add("RecordEvidence/Subject"+tc.name, tc.field, func(ctx context.Context, f *fixture) error {
			sub := subject(f)
			tc.mod(&sub)
			return f.store.RecordEvidence(ctx, turnframe.NewEvidence(sub, "", turnframe.ActorOperator, "", "", "", t0))
		})
	}
	for _, limit := range []int{0, -1, turnframe.MaxLimit + 1} {
		add(fmt.Sprintf("History/Limit%d", limit), "limit", func(ctx context.Context, f *fixture) error {
			_, err := f.store.History(ctx, subject(f), 0, limit)
			return err
		})
	}
	evidence := func(mod func(r *turnframe.HistoryRecord)) func(ctx context.Context, f *fixture) error {
		return func(ctx context.Context, f *fixture) error {
			rec := turnframe.NewEvidence(turnframe.JournalSubject(f.account, "u1"), "", turnframe.ActorPolicy, "c", "r", "n", t0)
			mod(&rec)
			return f.store.RecordEvidence(ctx, rec)
		}
	}
	add("RecordEvidence/NoActor", "actor", evidence(func(r *turnframe.HistoryRecord) { r.Actor = "" }))
	add("RecordEvidence/CodeOversize", "code", evidence(func(r *turnframe.HistoryRecord) { r.Code = long(201) }))
	add("RecordEvidence/RemoteRefOversize", "remote_ref", evidence(func(r *turnframe.HistoryRecord) { r.RemoteRef = long(turnframe.MaxRemoteRefLen + 1) }))
	add("RecordEvidence/NoteOversize", "note", evidence(func(r *turnframe.HistoryRecord) { r.Note = long(turnframe.MaxNoteLen + 1) }))
	add("RecordEvidence/ZeroAt", "at", evidence(func(r *turnframe.HistoryRecord) { r.At = time.Time{} }))
	return calls
}

// badCallsBefore are the bad calls the suite held before issues 11 and 12.
func badCallsBefore() []call {
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
		{name: "Apply/EmptyAccount", do: w(func(f *fixture, w *turnframe.Write) { w.Account = "" })},
		{name: "Apply/OversizeAccount", do: w(func(f *fixture, w *turnframe.Write) { w.Account = turnframe.AccountID(long(129)) })},
		{name: "Apply/NonUTF8Account", do: w(func(f *fixture, w *turnframe.Write) { w.Account = turnframe.AccountID(badUTF8) })},
		{name: "Apply/ZeroTurn", do: w(func(f *fixture, w *turnframe.Write) { w.Turn = turnframe.TurnID{} })},
		{name: "Apply/ZeroNow", do: w(func(f *fixture, w *turnframe.Write) { w.Now = time.Time{} })},
		{name: "Apply/PhaseOutOfRange", do: w(func(f *fixture, w *turnframe.Write) { w.Phase = 99 })},
		{name: "Apply/EmptyKey", do: w(func(f *fixture, w *turnframe.Write) {
			w.Admit = []turnframe.Command{{Key: "", Case: "c", Name: "n"}}
		})},
		{name: "Apply/OversizeKey", do: w(func(f *fixture, w *turnframe.Write) {
			w.Admit = []turnframe.Command{{Key: turnframe.IdempotencyKey(long(256)), Case: "c", Name: "n"}}
		})},
		{name: "Apply/NonUTF8Case", do: w(func(f *fixture, w *turnframe.Write) {
			w.Admit = []turnframe.Command{{Key: "k9", Case: turnframe.CaseKey(badUTF8), Name: "n"}}
		})},
		{name: "Apply/OversizeName", do: w(func(f *fixture, w *turnframe.Write) {
			w.Admit = []turnframe.Command{{Key: "k9", Case: "c", Name: long(201)}}
		})},
		{name: "Apply/KeyTwice", do: w(func(f *fixture, w *turnframe.Write) {
			w.Admit = []turnframe.Command{{Key: "k9", Case: "c", Name: "n"}, {Key: "k9", Case: "c", Name: "n"}}
		})},
		{name: "Apply/ExecutingZeroAttempt", do: w(func(f *fixture, w *turnframe.Write) {
			w.Settle = []turnframe.Settlement{{Key: "k1", To: turnframe.JournalExecuting}}
		})},
		{name: "Apply/SettleStatusOutOfRange", do: w(func(f *fixture, w *turnframe.Write) {
			w.Settle = []turnframe.Settlement{{Key: "k1", To: 42}}
		})},
		{name: "Apply/OversizeCode", do: w(func(f *fixture, w *turnframe.Write) {
			w.Settle = []turnframe.Settlement{{Key: "k1", To: turnframe.JournalRejected, Code: long(201)}}
		})},
		{name: "Apply/OversizeRemoteRef", do: w(func(f *fixture, w *turnframe.Write) {
			w.Settle = []turnframe.Settlement{{Key: "k1", To: turnframe.JournalOutcomeUnknown, RemoteRef: long(1025)}}
		})},
		{name: "Apply/EventsWithoutCommit", do: w(func(f *fixture, w *turnframe.Write) { w.Events = []turnframe.Event{{Case: "c1", Type: "t"}} })},
		{name: "Apply/OutboxWithoutCommit", do: w(func(f *fixture, w *turnframe.Write) { w.Outbox = []turnframe.OutboxMessage{{Destination: "pay"}} })},
		{name: "Apply/EmptyDestination", do: w(func(f *fixture, w *turnframe.Write) {
			w.Settle = []turnframe.Settlement{{Key: "k1", To: turnframe.JournalCommitted}}
			w.Outbox = []turnframe.OutboxMessage{{Destination: ""}}
		})},
		{name: "Apply/NonUTF8OrderKey", do: w(func(f *fixture, w *turnframe.Write) {
			w.Settle = []turnframe.Settlement{{Key: "k1", To: turnframe.JournalCommitted}}
			w.Outbox = []turnframe.OutboxMessage{{Destination: "pay", OrderKey: badUTF8}}
		})},
		{name: "Apply/EmptyEventType", do: w(func(f *fixture, w *turnframe.Write) {
			w.Settle = []turnframe.Settlement{{Key: "k1", To: turnframe.JournalCommitted}}
			w.Events = []turnframe.Event{{Case: "c1"}}
		})},
		{name: "Apply/ExpectBadCase", do: w(func(f *fixture, w *turnframe.Write) { w.Expect = map[turnframe.CaseKey]turnframe.CaseRevision{"": 1} })},
		{name: "Apply/BeginOfOtherTurn", do: w(func(f *fixture, w *turnframe.Write) {
			w.Turn = turnframe.NewIDGenerator().TurnID(t0)
			w.Begin = &turnframe.StoredTurn{Account: f.account, ID: f.turn, Conversation: turnframe.NewIDGenerator().ConversationID(t0)}
		})},
		{name: "Apply/BeginZeroConversation", do: w(func(f *fixture, w *turnframe.Write) {
			w.Turn = turnframe.NewIDGenerator().TurnID(t0)
			w.Begin = &turnframe.StoredTurn{Account: f.account, ID: w.Turn}
		})},
		{name: "Apply/BeginOversizeText", do: w(func(f *fixture, w *turnframe.Write) {
			w.Turn = turnframe.NewIDGenerator().TurnID(t0)
			w.Begin = &turnframe.StoredTurn{Account: f.account, ID: w.Turn, Conversation: turnframe.NewIDGenerator().ConversationID(t0), Text: long(64<<10 + 1)}
		})},
		{name: "TurnPhase/EmptyAccount", do: func(ctx context.Context, f *fixture) error { _, err := f.store.TurnPhase(ctx, "", f.turn); return err }},
		{name: "TurnPhase/ZeroTurn", do: func(ctx context.Context, f *fixture) error {
			_, err := f.store.TurnPhase(ctx, f.account, turnframe.TurnID{})
			return err
		}},
		{name: "LoadTurn/NonUTF8Account", do: func(ctx context.Context, f *fixture) error {
			_, err := f.store.LoadTurn(ctx, turnframe.AccountID(badUTF8), f.turn)
			return err
		}},
		{name: "LoadTurn/ZeroTurn", do: func(ctx context.Context, f *fixture) error {
			_, err := f.store.LoadTurn(ctx, f.account, turnframe.TurnID{})
			return err
		}},
		{name: "ListUnfinishedTurns/ZeroLimit", do: func(ctx context.Context, f *fixture) error {
			_, err := f.store.ListUnfinishedTurns(ctx, turnframe.RecoveryScope{}, 0)
			return err
		}},
		{name: "ListUnfinishedTurns/NegativeLimit", do: func(ctx context.Context, f *fixture) error {
			_, err := f.store.ListUnfinishedTurns(ctx, turnframe.RecoveryScope{}, -1)
			return err
		}},
		{name: "ListUnfinishedTurns/OversizeLimit", do: func(ctx context.Context, f *fixture) error {
			_, err := f.store.ListUnfinishedTurns(ctx, turnframe.RecoveryScope{}, turnframe.MaxLimit+1)
			return err
		}},
		{name: "ListUnfinishedTurns/OversizeAccount", do: func(ctx context.Context, f *fixture) error {
			_, err := f.store.ListUnfinishedTurns(ctx, turnframe.RecoveryScope{Account: turnframe.AccountID(long(129))}, 1)
			return err
		}},
		{name: "ForTurn/ZeroTurn", do: func(ctx context.Context, f *fixture) error {
			_, err := f.store.ForTurn(ctx, f.account, turnframe.TurnID{})
			return err
		}},
		{name: "ForTurn/EmptyAccount", do: func(ctx context.Context, f *fixture) error { _, err := f.store.ForTurn(ctx, "", f.turn); return err }},
		{name: "ByKey/EmptyKey", do: func(ctx context.Context, f *fixture) error { _, err := f.store.ByKey(ctx, f.account, ""); return err }},
		{name: "ByKey/OversizeKey", do: func(ctx context.Context, f *fixture) error {
			_, err := f.store.ByKey(ctx, f.account, turnframe.IdempotencyKey(long(256)))
			return err
		}},
		{name: "ByKey/NonUTF8Key", do: func(ctx context.Context, f *fixture) error {
			_, err := f.store.ByKey(ctx, f.account, turnframe.IdempotencyKey(badUTF8))
			return err
		}},
		{name: "EventsByID/EmptyAccount", do: func(ctx context.Context, f *fixture) error {
			_, err := f.store.EventsByID(ctx, "", []turnframe.EventID{f.event})
			return err
		}},
		{name: "EventsSince/EmptyCase", do: func(ctx context.Context, f *fixture) error {
			_, err := f.store.EventsSince(ctx, f.account, "", 0, 10)
			return err
		}},
		{name: "EventsSince/ZeroLimit", do: func(ctx context.Context, f *fixture) error {
			_, err := f.store.EventsSince(ctx, f.account, "c1", 0, 0)
			return err
		}},
		{name: "EventsSince/NegativeLimit", do: func(ctx context.Context, f *fixture) error {
			_, err := f.store.EventsSince(ctx, f.account, "c1", 0, -5)
			return err
		}},
		{name: "CaseRevision/OversizeCase", do: func(ctx context.Context, f *fixture) error {
			_, err := f.store.CaseRevision(ctx, f.account, turnframe.CaseKey(long(201)))
			return err
		}},
		{name: "Replay/ZeroTurn", do: func(ctx context.Context, f *fixture) error {
			_, err := f.store.Replay(ctx, f.account, turnframe.TurnID{})
			return err
		}},
		{name: "ClaimDue/ZeroNow", do: func(ctx context.Context, f *fixture) error {
			_, err := f.store.ClaimDue(ctx, time.Time{}, 1, "w", time.Minute)
			return err
		}},
		{name: "ClaimDue/ZeroLimit", do: func(ctx context.Context, f *fixture) error {
			_, err := f.store.ClaimDue(ctx, t0, 0, "w", time.Minute)
			return err
		}},
		{name: "ClaimDue/NegativeLimit", do: func(ctx context.Context, f *fixture) error {
			_, err := f.store.ClaimDue(ctx, t0, -1, "w", time.Minute)
			return err
		}},
		{name: "ClaimDue/EmptyWorker", do: func(ctx context.Context, f *fixture) error {
			_, err := f.store.ClaimDue(ctx, t0, 1, "", time.Minute)
			return err
		}},
		{name: "ClaimDue/NonUTF8Worker", do: func(ctx context.Context, f *fixture) error {
			_, err := f.store.ClaimDue(ctx, t0, 1, badUTF8, time.Minute)
			return err
		}},
		{name: "ClaimDue/OversizeWorker", do: func(ctx context.Context, f *fixture) error {
			_, err := f.store.ClaimDue(ctx, t0, 1, long(201), time.Minute)
			return err
		}},
		{name: "Complete/ZeroClaimID", do: func(ctx context.Context, f *fixture) error {
			c := f.claim
			c.ID = turnframe.OutboxID{}
			return turnframe.CompleteClaim(ctx, f.store, c, "", t0)
		}},
		{name: "Complete/EmptyWorker", do: func(ctx context.Context, f *fixture) error {
			c := f.claim
			c.Worker = ""
			return turnframe.CompleteClaim(ctx, f.store, c, "", t0)
		}},
		{name: "Complete/ZeroAttempts", do: func(ctx context.Context, f *fixture) error {
			c := f.claim
			c.Attempts = 0
			return turnframe.CompleteClaim(ctx, f.store, c, "", t0)
		}},
		{name: "Complete/ZeroNow", do: func(ctx context.Context, f *fixture) error {
			return turnframe.CompleteClaim(ctx, f.store, f.claim, "", time.Time{})
		}},
		{name: "Complete/OversizeRef", do: func(ctx context.Context, f *fixture) error {
			return turnframe.CompleteClaim(ctx, f.store, f.claim, long(1025), t0)
		}},
		{name: "Retry/ZeroAt", do: func(ctx context.Context, f *fixture) error {
			return turnframe.RetryClaim(ctx, f.store, f.claim, "c", time.Time{})
		}},
		{name: "Retry/NonUTF8Code", do: func(ctx context.Context, f *fixture) error {
			return turnframe.RetryClaim(ctx, f.store, f.claim, badUTF8, t0)
		}},
		{name: "Fail/OversizeCode", do: func(ctx context.Context, f *fixture) error {
			return turnframe.FailClaim(ctx, f.store, f.claim, long(201), t0)
		}},
		{name: "Fail/ZeroNow", do: func(ctx context.Context, f *fixture) error {
			return turnframe.FailClaim(ctx, f.store, f.claim, "c", time.Time{})
		}},
		{name: "MarkUnknown/NonUTF8Ref", do: func(ctx context.Context, f *fixture) error {
			return turnframe.MarkClaimUnknown(ctx, f.store, f.claim, badUTF8, t0)
		}},
		{name: "Settle/ToDispatching", do: settle(func(s *turnframe.OutboxSettlement) { s.To = turnframe.OutboxDispatching })},
		{name: "Settle/ToOutOfRange", do: settle(func(s *turnframe.OutboxSettlement) { s.To = 77 })},
		{name: "Settle/RetryZeroAt", do: settle(func(s *turnframe.OutboxSettlement) { s.To = turnframe.OutboxPending })},
		{name: "Settle/ZeroNow", do: settle(func(s *turnframe.OutboxSettlement) { s.Now = time.Time{} })},
		{name: "Resolve/ZeroID", do: func(ctx context.Context, f *fixture) error {
			return f.store.Resolve(ctx, turnframe.Resolution{Verdict: turnframe.VerdictCompleted, Now: t0})
		}},
		{name: "Resolve/Unresolved", do: func(ctx context.Context, f *fixture) error {
			return f.store.Resolve(ctx, turnframe.Resolution{ID: f.claim.ID, Verdict: turnframe.VerdictUnresolved, Now: t0})
		}},
		{name: "Resolve/VerdictOutOfRange", do: func(ctx context.Context, f *fixture) error {
			return f.store.Resolve(ctx, turnframe.Resolution{ID: f.claim.ID, Verdict: 9, Now: t0})
		}},
		{name: "Resolve/OversizeCode", do: func(ctx context.Context, f *fixture) error {
			return f.store.Resolve(ctx, turnframe.Resolution{ID: f.claim.ID, Verdict: turnframe.VerdictFailed, Code: long(201), Now: t0})
		}},
		{name: "Resolve/ZeroNow", do: func(ctx context.Context, f *fixture) error {
			return f.store.Resolve(ctx, turnframe.Resolution{ID: f.claim.ID, Verdict: turnframe.VerdictFailed})
		}},
		{name: "Requeue/ZeroID", do: func(ctx context.Context, f *fixture) error { return f.store.Requeue(ctx, turnframe.OutboxID{}, 0, t0) }},
		{name: "Requeue/ZeroAt", do: func(ctx context.Context, f *fixture) error { return f.store.Requeue(ctx, f.claim.ID, 0, time.Time{}) }},
		{name: "ExpireClaims/ZeroTime", do: func(ctx context.Context, f *fixture) error {
			_, err := f.store.ExpireClaims(ctx, time.Time{})
			return err
		}},
		{name: "GetOutbox/ZeroID", do: func(ctx context.Context, f *fixture) error {
			_, err := f.store.GetOutbox(ctx, turnframe.OutboxID{})
			return err
		}},
		{name: "ListOutbox/ZeroLimit", do: func(ctx context.Context, f *fixture) error {
			_, err := f.store.ListOutbox(ctx, turnframe.OutboxFilter{})
			return err
		}},
		{name: "ListOutbox/NegativeLimit", do: func(ctx context.Context, f *fixture) error {
			_, err := f.store.ListOutbox(ctx, turnframe.OutboxFilter{Limit: -3})
			return err
		}},
		{name: "ListOutbox/StatusOutOfRange", do: func(ctx context.Context, f *fixture) error {
			_, err := f.store.ListOutbox(ctx, turnframe.OutboxFilter{Status: 42, Limit: 1})
			return err
		}},
		{name: "ListOutbox/NonUTF8Account", do: func(ctx context.Context, f *fixture) error {
			_, err := f.store.ListOutbox(ctx, turnframe.OutboxFilter{Account: turnframe.AccountID(badUTF8), Limit: 1})
			return err
		}},
		{name: "Prune/ZeroTime", do: func(ctx context.Context, f *fixture) error { _, err := f.store.Prune(ctx, time.Time{}); return err }},
	}
}

// validCalls are correct calls, reads and writes, for the cancelled
// context and the closed store.
func validCalls() []call {
	return []call{
		{name: "Apply", do: func(ctx context.Context, f *fixture) error {
			_, err := f.store.Apply(ctx, turnframe.Write{Account: f.account, Turn: f.turn, Now: t0,
				Replay: &turnframe.ReplayRecord{Response: "changed"}})
			return err
		}},
		{name: "TurnPhase", do: func(ctx context.Context, f *fixture) error {
			_, err := f.store.TurnPhase(ctx, f.account, f.turn)
			return err
		}},
		{name: "LoadTurn", do: func(ctx context.Context, f *fixture) error {
			_, err := f.store.LoadTurn(ctx, f.account, f.turn)
			return err
		}},
		{name: "ListUnfinishedTurns", do: func(ctx context.Context, f *fixture) error {
			_, err := f.store.ListUnfinishedTurns(ctx, turnframe.RecoveryScope{}, 10)
			return err
		}},
		{name: "ForTurn", do: func(ctx context.Context, f *fixture) error {
			_, err := f.store.ForTurn(ctx, f.account, f.turn)
			return err
		}},
		{name: "ByKey", do: func(ctx context.Context, f *fixture) error { _, err := f.store.ByKey(ctx, f.account, "k1"); return err }},
		{name: "EventsByID", do: func(ctx context.Context, f *fixture) error {
			_, err := f.store.EventsByID(ctx, f.account, []turnframe.EventID{f.event})
			return err
		}},
		{name: "EventsSince", do: func(ctx context.Context, f *fixture) error {
			_, err := f.store.EventsSince(ctx, f.account, "c1", 0, 10)
			return err
		}},
		{name: "CaseRevision", do: func(ctx context.Context, f *fixture) error {
			_, err := f.store.CaseRevision(ctx, f.account, "c1")
			return err
		}},
		{name: "Replay", do: func(ctx context.Context, f *fixture) error {
			_, err := f.store.Replay(ctx, f.account, f.turn)
			return err
		}},
		{name: "ClaimDue", do: func(ctx context.Context, f *fixture) error {
			_, err := f.store.ClaimDue(ctx, t0.Add(time.Hour), 10, "w2", time.Minute)
			return err
		}},
		{name: "ExtendClaims", do: func(ctx context.Context, f *fixture) error {
			_, err := f.store.ExtendClaims(ctx, []turnframe.Claim{f.claim}, t0, fixtureLease)
			return err
		}},
		{name: "ReleaseClaim", do: func(ctx context.Context, f *fixture) error { return f.store.ReleaseClaim(ctx, f.claim.ID, 0, t0) }},
		{name: "Complete", do: func(ctx context.Context, f *fixture) error {
			return turnframe.CompleteClaim(ctx, f.store, f.claim, "ref", t0)
		}},
		{name: "Retry", do: func(ctx context.Context, f *fixture) error {
			return turnframe.RetryClaim(ctx, f.store, f.claim, "c", t0)
		}},
		{name: "Fail", do: func(ctx context.Context, f *fixture) error {
			return turnframe.FailClaim(ctx, f.store, f.claim, "c", t0)
		}},
		{name: "MarkUnknown", do: func(ctx context.Context, f *fixture) error {
			return turnframe.MarkClaimUnknown(ctx, f.store, f.claim, "r", t0)
		}},
		{name: "Settle", do: func(ctx context.Context, f *fixture) error {
			_, err := f.store.Settle(ctx, []turnframe.OutboxSettlement{{Claim: f.claim, To: turnframe.OutboxCompleted, Now: t0}})
			return err
		}},
		{name: "Resolve", do: func(ctx context.Context, f *fixture) error {
			return f.store.Resolve(ctx, turnframe.Resolution{ID: f.unknownRow, Verdict: turnframe.VerdictEscalate, Actor: turnframe.ActorPolicy, Now: t0})
		}},
		{name: "Requeue", do: func(ctx context.Context, f *fixture) error { return f.store.Requeue(ctx, f.claim.ID, 0, t0) }},
		{name: "ExpireClaims", do: func(ctx context.Context, f *fixture) error {
			_, err := f.store.ExpireClaims(ctx, t0.Add(2*fixtureLease))
			return err
		}},
		{name: "History", do: func(ctx context.Context, f *fixture) error {
			_, err := f.store.History(ctx, turnframe.OutboxSubject(f.account, f.unknownRow), 0, 10)
			return err
		}},
		{name: "RecordEvidence", do: func(ctx context.Context, f *fixture) error {
			return f.store.RecordEvidence(ctx, turnframe.NewEvidence(turnframe.OutboxSubject(f.account, f.unknownRow), "", turnframe.ActorPolicy, "lookup.unsure", "", "", t0))
		}},
		{name: "GetOutbox", do: func(ctx context.Context, f *fixture) error { _, err := f.store.GetOutbox(ctx, f.claim.ID); return err }},
		{name: "ListOutbox", do: func(ctx context.Context, f *fixture) error {
			_, err := f.store.ListOutbox(ctx, turnframe.OutboxFilter{Limit: 10})
			return err
		}},
		{name: "Prune", do: func(ctx context.Context, f *fixture) error {
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
	for _, turn := range []turnframe.TurnID{f.turn, f.planned, f.unknownTurn, f.abandoned, f.intervention} {
		e, err := f.store.ForTurn(bg, f.account, turn)
		fmt.Fprintf(&b, "%+v %v\n", e, err)
		st, err := f.store.LoadTurn(bg, f.account, turn)
		fmt.Fprintf(&b, "%+v %v\n", st, err)
		rp, err := f.store.Replay(bg, f.account, turn)
		fmt.Fprintf(&b, "%+v %v\n", rp, err)
	}
	ev, err := f.store.EventsSince(bg, f.account, "c1", 0, 100)
	fmt.Fprintf(&b, "%+v %v\n", ev, err)
	un, err := f.store.ListUnfinishedTurns(bg, turnframe.RecoveryScope{}, 100)
	fmt.Fprintf(&b, "%+v %v\n", un, err)
	// The audit trail: of every turn, every key and every row.
	subjects := []turnframe.Subject{}
	for _, turn := range []turnframe.TurnID{f.turn, f.planned, f.unknownTurn, f.abandoned, f.intervention} {
		subjects = append(subjects, turnframe.TurnSubject(f.account, turn))
	}
	for _, key := range []turnframe.IdempotencyKey{"k1", "k2", "p1", "x1", "u1", "v1", "n1", "n2"} {
		subjects = append(subjects, turnframe.JournalSubject(f.account, key))
	}
	for _, r := range rows {
		subjects = append(subjects, turnframe.OutboxSubject(r.Account, r.ID))
	}
	for _, s := range subjects {
		h, err := f.store.History(bg, s, 0, 100)
		fmt.Fprintf(&b, "%v %s: %+v %v\n", s.Kind, s.Ref, h, err)
	}
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
					if c.field != "" {
						is.Equal(ie.Field, c.field) // the field at fault
					}
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
			calls := append(validCalls(), call{name: "Close", do: func(context.Context, *fixture) error { return f.store.Close() }})
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
