package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/turnframe/turnframe"
)

// base is the suite's clock: every time is base plus an offset, so nothing
// depends on when the suite runs.
var base = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// lease is how long the suite's claims and journal takes are held: long
// enough that the offsets a test steps through stay inside it unless the
// test means to step past it.
const lease = 10 * time.Second

// at returns base plus d.
func at(d time.Duration) time.Time { return base.Add(d) }

// The accounts the suite writes as.
const (
	acme   turnframe.AccountID = "acme"
	globex turnframe.AccountID = "globex"
)

// env is one subtest's store and the helpers that write to it. It remembers
// every turn, key and case a write named, so snapshot can read them all back
// and a refused write can be shown to have changed nothing.
type env struct {
	t    *testing.T
	ctx  context.Context
	s    turnframe.Store
	open func(t *testing.T) turnframe.Store
	ids  *turnframe.IDGenerator
	n    int

	turns map[turnRef]bool
	keys  map[keyRef]bool
	cases map[caseRef]bool
}

type turnRef struct {
	account turnframe.AccountID
	turn    turnframe.TurnID
}

type keyRef struct {
	account turnframe.AccountID
	key     turnframe.IdempotencyKey
}

type caseRef struct {
	account turnframe.AccountID
	c       turnframe.CaseKey
}

func newEnv(t *testing.T, open func(t *testing.T) turnframe.Store) *env {
	t.Helper()
	s := open(t)
	if s == nil {
		t.Fatal("storetest: open returned a nil store")
	}
	return &env{
		t: t, ctx: context.Background(), s: s, open: open,
		ids:   turnframe.NewIDGenerator(),
		turns: make(map[turnRef]bool),
		keys:  make(map[keyRef]bool),
		cases: make(map[caseRef]bool),
	}
}

// fresh returns a name no other call in this env returned.
func (e *env) fresh(prefix string) string {
	e.n++
	return fmt.Sprintf("%s-%d", prefix, e.n)
}

// freshKey returns an idempotency key no write of this env used.
func (e *env) freshKey() turnframe.IdempotencyKey {
	return turnframe.IdempotencyKey(e.fresh("key"))
}

// command returns a command on c under key, with a payload.
func command(key turnframe.IdempotencyKey, c turnframe.CaseKey) turnframe.Command {
	return turnframe.Command{Key: key, Case: c, Name: "book", Payload: []byte(`{"seats":2}`)}
}

// note remembers everything w names.
func (e *env) note(w turnframe.Write) {
	e.turns[turnRef{w.Account, w.Turn}] = true
	for _, c := range w.Admit {
		e.keys[keyRef{w.Account, c.Key}] = true
		e.cases[caseRef{w.Account, c.Case}] = true
	}
	for _, s := range w.Settle {
		e.keys[keyRef{w.Account, s.Key}] = true
	}
	for _, ev := range w.Events {
		e.cases[caseRef{w.Account, ev.Case}] = true
	}
	for c := range w.Expect {
		e.cases[caseRef{w.Account, c}] = true
	}
}

// try applies w and returns what the store said.
func (e *env) try(w turnframe.Write) (turnframe.Applied, error) {
	e.note(w)
	return e.s.Apply(e.ctx, w)
}

// apply applies w, which must succeed.
func (e *env) apply(w turnframe.Write) turnframe.Applied {
	e.t.Helper()
	a, err := e.try(w)
	if err != nil {
		e.t.Fatalf("apply: %v", err)
	}
	return a
}

// beginWrite returns the Write that begins a new turn of account at now.
func (e *env) beginWrite(account turnframe.AccountID, now time.Time) turnframe.Write {
	turn := e.ids.TurnID(now)
	return turnframe.Write{
		Account: account, Turn: turn, Now: now,
		Begin: &turnframe.StoredTurn{
			Account: account, ID: turn, Conversation: e.ids.ConversationID(now),
			Text: "book two seats for friday", ReceivedAt: now,
		},
	}
}

// begin begins a new turn of account at now and returns its id.
func (e *env) begin(account turnframe.AccountID, now time.Time) turnframe.TurnID {
	e.t.Helper()
	w := e.beginWrite(account, now)
	e.apply(w)
	return w.Turn
}

// admit admits cmds in turn at now.
func (e *env) admit(account turnframe.AccountID, turn turnframe.TurnID, now time.Time, cmds ...turnframe.Command) turnframe.Applied {
	e.t.Helper()
	return e.apply(turnframe.Write{Account: account, Turn: turn, Now: now, Admit: cmds})
}

// execute starts a new attempt of the entry under key, taking it from the
// attempt it is under now (Prior), holds it for lease, and returns its id.
func (e *env) execute(account turnframe.AccountID, turn turnframe.TurnID, key turnframe.IdempotencyKey, now time.Time) turnframe.AttemptID {
	e.t.Helper()
	attempt := e.ids.AttemptID(now)
	prior := e.entry(account, key).Attempt
	e.apply(turnframe.Write{Account: account, Turn: turn, Now: now,
		Settle: []turnframe.Settlement{take(key, attempt, prior)}})
	return attempt
}

// take returns the settlement by which attempt takes the entry under key
// from prior (zero for an entry never run), holding it for lease.
func take(key turnframe.IdempotencyKey, attempt, prior turnframe.AttemptID) turnframe.Settlement {
	return turnframe.Settlement{Key: key, To: turnframe.JournalExecuting, Attempt: attempt, Prior: prior, Lease: lease}
}

// commitWrite returns the Write committing attempt of key with events and
// outbox rows.
func commitWrite(account turnframe.AccountID, turn turnframe.TurnID, key turnframe.IdempotencyKey, attempt turnframe.AttemptID, now time.Time, events []turnframe.Event, outbox []turnframe.OutboxMessage) turnframe.Write {
	return turnframe.Write{
		Account: account, Turn: turn, Now: now,
		Settle: []turnframe.Settlement{{Key: key, To: turnframe.JournalCommitted, Attempt: attempt}},
		Events: events, Outbox: outbox,
	}
}

// commit commits attempt of key with events and outbox rows.
func (e *env) commit(account turnframe.AccountID, turn turnframe.TurnID, key turnframe.IdempotencyKey, attempt turnframe.AttemptID, now time.Time, events []turnframe.Event, outbox []turnframe.OutboxMessage) turnframe.Applied {
	e.t.Helper()
	return e.apply(commitWrite(account, turn, key, attempt, now, events, outbox))
}

// settle moves the entry under key, which must succeed.
func (e *env) settle(account turnframe.AccountID, turn turnframe.TurnID, now time.Time, s turnframe.Settlement) turnframe.JournalEntry {
	e.t.Helper()
	a := e.apply(turnframe.Write{Account: account, Turn: turn, Now: now, Settle: []turnframe.Settlement{s}})
	return a.Settled[0]
}

// running begins a turn of account at now, admits one command on c under a
// fresh key and starts it: the turn, the key and the attempt.
func (e *env) running(account turnframe.AccountID, c turnframe.CaseKey, now time.Time) (turnframe.TurnID, turnframe.IdempotencyKey, turnframe.AttemptID) {
	e.t.Helper()
	key := e.freshKey()
	attempt := e.ids.AttemptID(now)
	w := e.beginWrite(account, now)
	w.Admit = []turnframe.Command{command(key, c)}
	w.Settle = []turnframe.Settlement{take(key, attempt, turnframe.AttemptID{})}
	e.apply(w)
	return w.Turn, key, attempt
}

// enqueue commits one command of account at now that enqueues msgs, and
// returns the rows as Apply reported them.
func (e *env) enqueue(account turnframe.AccountID, now time.Time, msgs ...turnframe.OutboxMessage) []turnframe.OutboxEntry {
	e.t.Helper()
	c := turnframe.CaseKey(e.fresh("case"))
	turn, key, attempt := e.running(account, c, now)
	a := e.commit(account, turn, key, attempt, now, []turnframe.Event{{Case: c, Type: "sent"}}, msgs)
	return a.Outbox
}

// message returns an outbox message to "payments" with a payload.
func message(orderKey string) turnframe.OutboxMessage {
	return turnframe.OutboxMessage{Destination: "payments", Payload: []byte(`{"amount":100}`), OrderKey: orderKey}
}

// claim claims at most limit rows at now as worker, which must succeed.
func (e *env) claim(now time.Time, limit int, worker string) []turnframe.Claim {
	e.t.Helper()
	cs, err := e.s.ClaimDue(e.ctx, now, limit, worker, lease)
	if err != nil {
		e.t.Fatalf("claim: %v", err)
	}
	return cs
}

// claimOne claims at now and expects exactly one row.
func (e *env) claimOne(now time.Time, worker string) turnframe.Claim {
	e.t.Helper()
	cs := e.claim(now, turnframe.MaxLimit, worker)
	if len(cs) != 1 {
		e.t.Fatalf("claim at %v: got %d rows, want 1", now, len(cs))
	}
	return cs[0]
}

// row reads one outbox row, which must exist.
func (e *env) row(id turnframe.OutboxID) turnframe.OutboxRecord {
	e.t.Helper()
	r, err := e.s.GetOutbox(e.ctx, id)
	if err != nil {
		e.t.Fatalf("get outbox %v: %v", id, err)
	}
	return r
}

// entry reads one journal entry, which must exist.
func (e *env) entry(account turnframe.AccountID, key turnframe.IdempotencyKey) turnframe.JournalEntry {
	e.t.Helper()
	j, err := e.s.ByKey(e.ctx, account, key)
	if err != nil {
		e.t.Fatalf("by key %q: %v", key, err)
	}
	return j
}

// phase reads a turn's phase, which must exist.
func (e *env) phase(account turnframe.AccountID, turn turnframe.TurnID) turnframe.TurnPhase {
	e.t.Helper()
	m, err := e.s.TurnPhase(e.ctx, account, turn)
	if err != nil {
		e.t.Fatalf("turn phase: %v", err)
	}
	return m.Phase
}

// claimedIDs returns the ids of claims, in order.
func claimedIDs(cs []turnframe.Claim) []turnframe.OutboxID {
	ids := make([]turnframe.OutboxID, len(cs))
	for i, c := range cs {
		ids[i] = c.ID
	}
	return ids
}

// entryIDs returns the ids of entries, in order.
func entryIDs(es []turnframe.OutboxEntry) []turnframe.OutboxID {
	ids := make([]turnframe.OutboxID, len(es))
	for i, c := range es {
		ids[i] = c.ID
	}
	return ids
}

// snapshot is everything the store answers about what env wrote: each read,
// by a name, with its value or the class of its error.
type snapshot map[string]any

// snapshot reads back every turn, key, case and outbox row env knows of,
// and the history of each turn, key and row.
func (e *env) snapshot() snapshot {
	e.t.Helper()
	snap := make(snapshot)
	put := func(name string, v any, err error) {
		switch {
		case err == nil:
			snap[name] = v
		case errors.Is(err, turnframe.ErrNotFound):
			snap[name] = "not found"
		case errors.Is(err, turnframe.ErrInvalid):
			snap[name] = "invalid"
		default:
			e.t.Fatalf("snapshot %s: %v", name, err)
		}
	}
	for r := range e.turns {
		name := fmt.Sprintf("turn %q %v", r.account, r.turn)
		turn, err := e.s.LoadTurn(e.ctx, r.account, r.turn)
		put(name, turn, err)
		entries, err := e.s.ForTurn(e.ctx, r.account, r.turn)
		put(name+" entries", entries, err)
		replay, err := e.s.Replay(e.ctx, r.account, r.turn)
		put(name+" replay", replay, err)
		subject := turnframe.TurnSubject(r.account, r.turn)
		history, err := e.s.History(e.ctx, subject, 0, turnframe.MaxLimit)
		put(historyName(subject), history, err)
	}
	for k := range e.keys {
		name := fmt.Sprintf("key %q %q", k.account, k.key)
		entry, err := e.s.ByKey(e.ctx, k.account, k.key)
		put(name, entry, err)
		subject := turnframe.JournalSubject(k.account, k.key)
		history, err := e.s.History(e.ctx, subject, 0, turnframe.MaxLimit)
		put(historyName(subject), history, err)
	}
	for c := range e.cases {
		name := fmt.Sprintf("case %q %q", c.account, c.c)
		events, err := e.s.EventsSince(e.ctx, c.account, c.c, 0, turnframe.MaxLimit)
		put(name+" events", events, err)
		rev, err := e.s.CaseRevision(e.ctx, c.account, c.c)
		put(name+" revision", rev, err)
	}
	rows, err := e.s.ListOutbox(e.ctx, turnframe.OutboxFilter{Limit: turnframe.MaxLimit})
	put("outbox", rows, err)
	for _, r := range rows {
		subject := turnframe.OutboxSubject(r.Account, r.ID)
		history, err := e.s.History(e.ctx, subject, 0, turnframe.MaxLimit)
		put(historyName(subject), history, err)
	}
	unfinished, err := e.s.ListUnfinishedTurns(e.ctx, turnframe.RecoveryScope{}, turnframe.MaxLimit)
	put("unfinished", unfinished, err)
	return snap
}

// historyName is the name under which a snapshot holds subject's history.
func historyName(subject turnframe.Subject) string {
	return fmt.Sprintf("history %v %q %q", subject.Kind, subject.Account, subject.Ref)
}

// unchanged fails the test for every read that differs between before and
// the store now.
func (e *env) unchanged(before snapshot, what string) {
	e.t.Helper()
	e.same(before, e.snapshot(), what)
}

// same fails the test for every read that differs between before and after.
func (e *env) same(before, after snapshot, what string) {
	e.t.Helper()
	var names []string
	for name := range before {
		names = append(names, name)
	}
	for name := range after {
		if _, ok := before[name]; !ok {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	names = slices.Compact(names)
	for _, name := range names {
		if !reflect.DeepEqual(before[name], after[name]) {
			e.t.Errorf("%s changed %s:\nbefore: %+v\nafter:  %+v", what, name, before[name], after[name])
		}
	}
}

// refused applies w, expects an error wrapping want, and checks that the
// store did not change.
func (e *env) refused(w turnframe.Write, want error, what string) {
	e.t.Helper()
	e.note(w)
	before := e.snapshot()
	_, err := e.s.Apply(e.ctx, w)
	if !errors.Is(err, want) {
		e.t.Fatalf("%s: got error %v, want %v", what, err, want)
	}
	e.unchanged(before, what)
}

// sameEntry reports whether two journal entries hold the same values: times
// compared as instants, nil and empty slices alike.
func sameEntry(a, b turnframe.JournalEntry) bool {
	return a.Account == b.Account && a.Turn == b.Turn && a.Key == b.Key && a.Case == b.Case &&
		a.Name == b.Name && bytes.Equal(a.Payload, b.Payload) && a.Status == b.Status &&
		a.Attempt == b.Attempt && a.Attempts == b.Attempts && a.LeaseUntil.Equal(b.LeaseUntil) &&
		slices.Equal(a.EventIDs, b.EventIDs) && a.Code == b.Code && a.RemoteRef == b.RemoteRef &&
		a.AdmittedAt.Equal(b.AdmittedAt) && a.UpdatedAt.Equal(b.UpdatedAt) && a.NeedsApproval == b.NeedsApproval
}

// sameEvents reports whether two lists of events hold the same values.
func sameEvents(a, b []turnframe.StoredEvent) bool {
	return slices.EqualFunc(a, b, func(x, y turnframe.StoredEvent) bool {
		return x.ID == y.ID && x.Account == y.Account && x.Turn == y.Turn && x.Key == y.Key &&
			x.Revision == y.Revision && x.Case == y.Case && x.Type == y.Type &&
			bytes.Equal(x.Data, y.Data) && x.At.Equal(y.At)
	})
}

// sameRecord reports whether two outbox rows hold the same values: times
// compared as instants.
func sameRecord(a, b turnframe.OutboxRecord) bool {
	return a.ID == b.ID && a.Account == b.Account && a.Turn == b.Turn && a.Key == b.Key &&
		a.Destination == b.Destination && bytes.Equal(a.Payload, b.Payload) && a.OrderKey == b.OrderKey &&
		a.Attempts == b.Attempts && a.AttemptBase == b.AttemptBase && a.CreatedAt.Equal(b.CreatedAt) &&
		a.Status == b.Status && a.DueAt.Equal(b.DueAt) && a.ClaimedBy == b.ClaimedBy &&
		a.ClaimedAt.Equal(b.ClaimedAt) && a.LeaseUntil.Equal(b.LeaseUntil) && a.LastCode == b.LastCode &&
		a.RemoteRef == b.RemoteRef && a.UpdatedAt.Equal(b.UpdatedAt) && a.FinishedAt.Equal(b.FinishedAt)
}
