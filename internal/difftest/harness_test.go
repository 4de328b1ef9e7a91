package difftest_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/turnframe/turnframe"
)

// world is one store under test and what the harness learnt from its
// answers: the claims it handed out, the outbox rows and events it created.
// Ids are compared modulo a mapping: every ULID in a world's answers is
// replaced by the order in which that world first showed it, so two stores
// that agree produce the same text even if their ids were to differ.
type world struct {
	name   string
	store  turnframe.Store
	tokens map[string]int
	claims []turnframe.Claim
	outbox []turnframe.OutboxID
	events []turnframe.EventID
}

var ulidRE = regexp.MustCompile(`[0-9A-HJKMNP-TV-Z]{26}`)

func (w *world) norm(v any) string {
	s := dump(v)
	return ulidRE.ReplaceAllStringFunc(s, func(id string) string {
		n, ok := w.tokens[id]
		if !ok {
			n = len(w.tokens)
			w.tokens[id] = n
		}
		return fmt.Sprintf("#%d", n)
	})
}

// sentinels are the error classes results are compared by; messages differ
// between stores and are not compared.
var sentinels = []struct {
	name string
	err  error
}{
	{"NotFound", turnframe.ErrNotFound},
	{"Conflict", turnframe.ErrConflict},
	{"ClaimLost", turnframe.ErrClaimLost},
	{"Invalid", turnframe.ErrInvalid},
	{"Closed", turnframe.ErrClosed},
	{"Canceled", context.Canceled},
	{"Deadline", context.DeadlineExceeded},
}

// errClass names the sentinels err wraps: "ok" for nil, "other" for an error
// that wraps none (a store's own failure, which the stores must not differ
// on either).
func errClass(err error) string {
	if err == nil {
		return "ok"
	}
	var names []string
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			names = append(names, s.name)
		}
	}
	if len(names) == 0 {
		return "other"
	}
	return strings.Join(names, "|")
}

// Fixed universe the decoder picks from: small, so that keys, cases and
// order keys collide often.
var (
	accounts  = []turnframe.AccountID{"acct-a", "acct-b"}
	keys      = []turnframe.IdempotencyKey{"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9", "k10", "k11"}
	cases     = []turnframe.CaseKey{"c0", "c1", "c2"}
	names     = []string{"book", "pay"}
	payloads  = [][]byte{nil, []byte("x"), []byte("y")}
	workers   = []string{"w1", "w2", "w3"}
	dests     = []string{"payments", "mail"}
	orderKeys = []string{"", "o1", "o2"}
	texts     = []string{"", "book a seat? and pay", "héllo wörld? ok"}
	limits    = []int{1, 2, 3, 16, 0, -1, turnframe.MaxLimit + 1}
)

const turnSlots = 6

var epoch = time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)

type acctKey struct {
	acct turnframe.AccountID
	key  turnframe.IdempotencyKey
}

// runner decodes fuzz input into operations and runs each on every world.
type runner struct {
	t        testing.TB
	ctx      context.Context
	worlds   []*world
	in       []byte
	pos      int
	now      time.Time
	ops      int
	log      []string
	past     []time.Time
	statHook func(desc string, err error) // the clock at every op so far: cut-offs land on them exactly

	ids   *turnframe.IDGenerator // the harness's own ids: turns, conversations, attempts
	turns [turnSlots]turnframe.TurnID
	convs [turnSlots]turnframe.ConversationID

	// Hints read from the first world's answers, to steer the decoder
	// towards writes that can succeed. Both worlds get the same input.
	keysOf  map[int][]turnframe.IdempotencyKey
	caseOf  map[acctKey]turnframe.CaseKey
	attempt map[acctKey]turnframe.AttemptID
	status  map[acctKey]turnframe.JournalStatus
}

const maxOps = 400

// trace logs every operation and the first store's answer
// (DIFFTEST_TRACE=1 go test -run … -v), to see what an input exercises.
var trace = os.Getenv("DIFFTEST_TRACE") != ""

func newRunner(t testing.TB, in []byte, worlds []*world) *runner {
	r := &runner{
		t: t, ctx: context.Background(), worlds: worlds, in: in, now: epoch,
		ids:     turnframe.NewIDGeneratorFrom(rand.NewChaCha8([32]byte{1})),
		keysOf:  make(map[int][]turnframe.IdempotencyKey),
		caseOf:  make(map[acctKey]turnframe.CaseKey),
		attempt: make(map[acctKey]turnframe.AttemptID),
		status:  make(map[acctKey]turnframe.JournalStatus),
	}
	for i := range turnSlots {
		r.turns[i] = r.ids.TurnID(epoch.Add(time.Duration(i) * time.Millisecond))
		r.convs[i] = r.ids.ConversationID(epoch)
	}
	return r
}

func (r *runner) more() bool { return r.pos < len(r.in) && r.ops < maxOps }

// b returns the next input byte, 0 once the input is spent.
func (r *runner) b() byte {
	if r.pos >= len(r.in) {
		return 0
	}
	c := r.in[r.pos]
	r.pos++
	return c
}

func pick[T any](r *runner, xs []T) T { return xs[int(r.b())%len(xs)] }

// do runs f on every world and fails unless every world gave the same
// result and error class. It returns each world's value and error.
func (r *runner) do(desc string, f func(w *world) (any, error)) ([]any, []error) {
	r.t.Helper()
	r.log = append(r.log, fmt.Sprintf("%3d %s", r.ops, desc))
	vals := make([]any, len(r.worlds))
	errs := make([]error, len(r.worlds))
	outs := make([]string, len(r.worlds))
	for i, w := range r.worlds {
		v, err := f(w)
		vals[i], errs[i] = v, err
		class := errClass(err)
		if err != nil {
			outs[i] = "err " + class
		} else {
			outs[i] = "ok " + w.norm(v)
		}
	}
	if r.statHook != nil {
		r.statHook(desc, errs[0])
	}
	if trace {
		r.t.Logf("%s -> %.300s", desc, outs[0])
	}
	for i := 1; i < len(outs); i++ {
		if outs[i] != outs[0] {
			r.t.Fatalf("stores disagree at op %s\n%s: %s\n   error: %v\n%s: %s\n   error: %v\nops so far:\n%s",
				desc, r.worlds[0].name, outs[0], errs[0], r.worlds[i].name, outs[i], errs[i], strings.Join(r.log, "\n"))
		}
	}
	return vals, errs
}

// tick advances the clock by 1–64 ms, and now and then by a fraction of a
// microsecond, which every store must truncate the same way.
func (r *runner) tick() {
	r.past = append(r.past, r.now)
	c := r.b()
	r.now = r.now.Add(time.Duration(1+c%64) * time.Millisecond)
	if c&0x40 != 0 {
		r.now = r.now.Add(time.Duration(c) * 3 * time.Nanosecond)
	}
}

// cutoff returns a time before now: exactly the clock of an earlier op
// (where a strict "before" and "at or before" part ways), or now less a few
// milliseconds.
func (r *runner) cutoff() time.Time {
	c := r.b()
	if c&1 != 0 && len(r.past) > 0 {
		return r.past[len(r.past)-1-int(c>>1)%len(r.past)]
	}
	return r.now.Add(-time.Duration(c) * 3 * time.Millisecond)
}

func (r *runner) slot() (int, turnframe.AccountID, turnframe.TurnID) {
	c := r.b()
	s := int(c) % turnSlots
	acct := accounts[s%len(accounts)]
	if c&0xe0 == 0xe0 { // now and then the other tenant: ErrNotFound
		acct = accounts[(s+1)%len(accounts)]
	}
	return s, acct, r.turns[s]
}

// keyOf picks one of the keys the slot's turn admitted, or any key.
func (r *runner) keyOf(s int) turnframe.IdempotencyKey {
	c := r.b()
	ks := r.keysOf[s]
	if c&0x10 == 0 { // mostly one still pending, if any
		acct := accounts[s%len(accounts)]
		var pending []turnframe.IdempotencyKey
		for _, k := range ks {
			if r.status[acctKey{acct, k}].IsPending() {
				pending = append(pending, k)
			}
		}
		if len(pending) > 0 {
			ks = pending
		}
	}
	if len(ks) == 0 || c&0xe0 == 0xe0 {
		return keys[int(c)%len(keys)]
	}
	return ks[int(c)%len(ks)]
}

func (r *runner) apply(desc string, w turnframe.Write) ([]any, []error) {
	vals, errs := r.do(desc, func(wd *world) (any, error) {
		a, err := wd.store.Apply(r.ctx, w)
		if err == nil {
			for _, ev := range a.Events {
				wd.events = append(wd.events, ev.ID)
			}
			for _, o := range a.Outbox {
				wd.outbox = append(wd.outbox, o.ID)
			}
		}
		return a, err
	})
	if errs[0] == nil {
		a := vals[0].(turnframe.Applied)
		for _, e := range append(a.Admitted, a.Settled...) {
			r.status[acctKey{e.Account, e.Key}] = e.Status
		}
	}
	return vals, errs
}

func (r *runner) run() {
	r.t.Helper()
	for r.more() {
		r.tick()
		r.step(r.b())
		r.ops++
	}
	r.compareFinal()
	r.compareClosed()
}

func (r *runner) step(op byte) {
	switch op % 24 {
	case 20, 21, 22, 23:
		r.opRun()
	case 0, 1:
		r.opBegin()
	case 2, 3:
		r.opAdmit()
	case 4:
		r.opExecuting()
	case 5, 6:
		r.opCommit()
	case 7:
		r.opRejectOrUnknown()
	case 8:
		r.opReconcile()
	case 9:
		r.opPhase()
	case 10:
		r.opBadWrite()
	case 11, 12:
		r.opClaim()
	case 13:
		r.opSettleOne()
	case 14:
		r.opSettleBatch()
	case 15:
		r.opRelease()
	case 16:
		r.opResolveOrRequeue()
	case 17:
		r.opPrune()
	case 18, 19:
		r.opRead()
	}
}

func (r *runner) opBegin() {
	s, acct, turn := r.slot()
	c := r.b()
	text := texts[int(c)%len(texts)]
	conv := r.convs[s]
	switch c >> 4 {
	case 0xe:
		conv = turnframe.ConversationID{}
	case 0xf:
		text = "bad \xff utf8"
	}
	w := turnframe.Write{
		Account: acct, Turn: turn, Now: r.now,
		Begin: &turnframe.StoredTurn{Account: acct, ID: turn, Conversation: conv, Text: text, ReceivedAt: r.now},
	}
	if c&0x08 != 0 { // begin and plan in one write
		w.Phase = turnframe.PhasePlanned
		w.Admit = r.commands()
	}
	_, errs := r.apply(fmt.Sprintf("begin slot=%d acct=%s text=%q", s, acct, text), w)
	if errs[0] == nil {
		r.noteAdmitted(s, acct, w.Admit)
	}
}

func (r *runner) commands() []turnframe.Command {
	n := 1 + int(r.b())%3
	cmds := make([]turnframe.Command, 0, n)
	for range n {
		c := r.b()
		k := int(c) % len(keys)
		cmd := turnframe.Command{Key: keys[k], Case: cases[k%len(cases)], Name: names[k%len(names)], Payload: payloads[k%len(payloads)]}
		if c&0xe0 == 0xe0 { // the key reused for another command: ErrConflict
			cmd.Payload = []byte("other")
		}
		cmds = append(cmds, cmd)
	}
	return cmds
}

// noteAdmitted records the keys a successful admission gave the slot's turn
// (a key another turn admitted first stays that turn's).
func (r *runner) noteAdmitted(s int, acct turnframe.AccountID, cmds []turnframe.Command) {
	for _, cmd := range cmds {
		ak := acctKey{acct, cmd.Key}
		if _, ok := r.caseOf[ak]; ok {
			continue
		}
		r.caseOf[ak] = cmd.Case
		r.keysOf[s] = append(r.keysOf[s], cmd.Key)
	}
}

func (r *runner) opAdmit() {
	s, acct, turn := r.slot()
	cmds := r.commands()
	c := r.b()
	w := turnframe.Write{Account: acct, Turn: turn, Now: r.now, Admit: cmds}
	switch c % 6 {
	case 1:
		w.Phase = turnframe.PhasePlanned
	case 2:
		w.Phase = turnframe.PhaseInterpreted
	}
	if c&0x80 != 0 {
		w.Replay = r.replay()
	}
	_, errs := r.apply(fmt.Sprintf("admit slot=%d acct=%s cmds=%v phase=%v", s, acct, cmds, w.Phase), w)
	if errs[0] == nil && acct == accounts[s%len(accounts)] {
		r.noteAdmitted(s, acct, cmds)
	}
}

func (r *runner) replay() *turnframe.ReplayRecord {
	c := r.b()
	rec := &turnframe.ReplayRecord{LoadedCases: cases[:int(c)%len(cases)], Response: texts[int(c>>2)%len(texts)]}
	if c&0x10 != 0 {
		rec.Understanding = &turnframe.Understanding{Questions: []turnframe.UnderstoodQuestion{
			{Unit: int(c) % 3, Words: turnframe.WordRange{First: 0, Last: 2, Start: 0, End: int(c) % 12}, Basis: turnframe.AnswerBasis(c % 3), ContinuesPrevious: c&0x20 != 0},
		}}
	}
	return rec
}

func (r *runner) opExecuting() {
	s, acct, turn := r.slot()
	key := r.keyOf(s)
	att := r.ids.AttemptID(r.now)
	c := r.b()
	w := turnframe.Write{Account: acct, Turn: turn, Now: r.now,
		Settle: []turnframe.Settlement{{Key: key, To: turnframe.JournalExecuting, Attempt: att}}}
	if c&1 != 0 {
		w.Phase = turnframe.PhaseExecuting
	}
	_, errs := r.apply(fmt.Sprintf("executing slot=%d key=%s", s, key), w)
	if errs[0] == nil {
		r.attempt[acctKey{acct, key}] = att
	}
}

// attemptFor returns the attempt that runs key, or a stale one now and then.
func (r *runner) attemptFor(acct turnframe.AccountID, key turnframe.IdempotencyKey, c byte) turnframe.AttemptID {
	if c&0xe0 == 0xe0 {
		return r.ids.AttemptID(r.now)
	}
	return r.attempt[acctKey{acct, key}]
}

func (r *runner) opCommit() {
	s, acct, turn := r.slot()
	key := r.keyOf(s)
	c := r.b()
	cs := r.caseOf[acctKey{acct, key}]
	if cs == "" || c&0x1c == 0x1c {
		cs = cases[int(c)%len(cases)]
	}
	w := turnframe.Write{Account: acct, Turn: turn, Now: r.now,
		Settle: []turnframe.Settlement{{Key: key, To: turnframe.JournalCommitted, Attempt: r.attemptFor(acct, key, c)}}}
	for i := range int(r.b()) % 3 {
		w.Events = append(w.Events, turnframe.Event{Case: cs, Type: fmt.Sprintf("ev%d", i), Data: []byte{byte(i)}})
	}
	for range int(r.b()) % 4 {
		d := r.b()
		m := turnframe.OutboxMessage{Destination: dests[int(d)%len(dests)], Payload: []byte{d}, OrderKey: orderKeys[int(d>>1)%len(orderKeys)]}
		switch d >> 6 {
		case 1:
			m.NotBefore = r.now.Add(time.Duration(d%32) * 10 * time.Millisecond)
		case 2:
			m.NotBefore = r.now.Add(-time.Duration(d%32) * time.Millisecond)
		}
		w.Outbox = append(w.Outbox, m)
	}
	e := r.b()
	if e&7 == 0 {
		w.Expect = map[turnframe.CaseKey]turnframe.CaseRevision{cs: turnframe.CaseRevision(e>>3) % 3}
	}
	if e&0x30 == 0x30 {
		w.Phase = turnframe.PhaseCommitted
	}
	r.apply(fmt.Sprintf("commit slot=%d key=%s events=%d outbox=%d expect=%v phase=%v", s, key, len(w.Events), len(w.Outbox), w.Expect, w.Phase), w)
}

// opRun does what Runtime.Execute does for one command: a write marking it
// Executing under a new attempt, then a write with its outcome.
func (r *runner) opRun() {
	s, acct, turn := r.slot()
	key := r.keyOf(s)
	att := r.ids.AttemptID(r.now)
	ak := acctKey{acct, key}
	_, errs := r.apply(fmt.Sprintf("run/executing slot=%d key=%s", s, key), turnframe.Write{Account: acct, Turn: turn, Now: r.now,
		Settle: []turnframe.Settlement{{Key: key, To: turnframe.JournalExecuting, Attempt: att}}})
	if errs[0] != nil {
		r.b()
		return
	}
	r.attempt[ak] = att
	c := r.b()
	w := turnframe.Write{Account: acct, Turn: turn, Now: r.now}
	st := turnframe.Settlement{Key: key, Attempt: att}
	switch c % 8 {
	case 0:
		st.To, st.Code = turnframe.JournalRejected, "refused"
	case 1:
		st.To, st.RemoteRef = turnframe.JournalOutcomeUnknown, "ref-9"
	default:
		st.To = turnframe.JournalCommitted
		cs := r.caseOf[ak]
		if cs == "" {
			cs = cases[0]
		}
		w.Events = []turnframe.Event{{Case: cs, Type: "done", Data: []byte{c}}}
		for i := range int(c>>3) % 4 {
			m := turnframe.OutboxMessage{Destination: dests[i%len(dests)], Payload: []byte{c, byte(i)}, OrderKey: orderKeys[int(c>>5+byte(i))%len(orderKeys)]}
			if c&0x80 != 0 && i == 0 {
				m.NotBefore = r.now.Add(time.Duration(c&0x1f) * 10 * time.Millisecond)
			}
			w.Outbox = append(w.Outbox, m)
		}
	}
	w.Settle = []turnframe.Settlement{st}
	r.apply(fmt.Sprintf("run/outcome slot=%d key=%s to=%v outbox=%d", s, key, st.To, len(w.Outbox)), w)
}

func (r *runner) opRejectOrUnknown() {
	s, acct, turn := r.slot()
	key := r.keyOf(s)
	c := r.b()
	st := turnframe.Settlement{Key: key, To: turnframe.JournalRejected, Attempt: r.attemptFor(acct, key, c), Code: "no-seat"}
	if c&1 != 0 {
		st.To, st.Code, st.RemoteRef = turnframe.JournalOutcomeUnknown, "", "ref-1"
	}
	w := turnframe.Write{Account: acct, Turn: turn, Now: r.now, Settle: []turnframe.Settlement{st}}
	if c&2 != 0 {
		w.Phase = turnframe.PhaseCommitted
	}
	r.apply(fmt.Sprintf("settle slot=%d key=%s to=%v phase=%v", s, key, st.To, w.Phase), w)
}

func (r *runner) opReconcile() {
	s, acct, turn := r.slot()
	key := r.keyOf(s)
	c := r.b()
	to := []turnframe.JournalStatus{turnframe.JournalCommitted, turnframe.JournalRejected, turnframe.JournalPending, turnframe.JournalExecuting}[c%4]
	st := turnframe.Settlement{Key: key, To: to}
	if to == turnframe.JournalExecuting {
		st.Attempt = r.ids.AttemptID(r.now)
	}
	r.apply(fmt.Sprintf("reconcile slot=%d key=%s to=%v", s, key, to), turnframe.Write{Account: acct, Turn: turn, Now: r.now, Settle: []turnframe.Settlement{st}})
}

func (r *runner) opPhase() {
	s, acct, turn := r.slot()
	c := r.b()
	w := turnframe.Write{Account: acct, Turn: turn, Now: r.now, Phase: turnframe.TurnPhase(c % 9)}
	if w.Phase.IsTerminal() && c&0x40 == 0 { // terminal phases end a slot for good: keep them rarer
		w.Phase = turnframe.PhaseCommitted
	}
	if c&0x80 != 0 {
		w.Replay = r.replay()
	}
	r.apply(fmt.Sprintf("phase slot=%d to=%v replay=%v", s, w.Phase, w.Replay != nil), w)
}

// opBadWrite sends a Write that validation must refuse, or one that
// reads the store before it is refused.
func (r *runner) opBadWrite() {
	s, acct, turn := r.slot()
	c := r.b()
	w := turnframe.Write{Account: acct, Turn: turn, Now: r.now}
	var what string
	switch c % 12 {
	case 0:
		w.Account, what = "", "empty account"
	case 1:
		w.Account, what = turnframe.AccountID(strings.Repeat("a", turnframe.MaxAccountLen+1)), "long account"
	case 2:
		w.Turn, what = turnframe.TurnID{}, "zero turn"
	case 3:
		w.Now, what = time.Time{}, "zero now"
	case 4:
		w.Admit, what = []turnframe.Command{{Key: "k0", Case: "c0", Name: "book"}, {Key: "k0", Case: "c0", Name: "book"}}, "key twice"
	case 5:
		w.Admit, what = []turnframe.Command{{Key: "k\xff", Case: "c0", Name: "book"}}, "non-utf8 key"
	case 6:
		w.Events, what = []turnframe.Event{{Case: "c0", Type: "ev"}}, "events without commit"
	case 7:
		w.Outbox, what = []turnframe.OutboxMessage{{Destination: "payments"}}, "outbox without commit"
	case 8:
		w.Settle, what = []turnframe.Settlement{{Key: "k0", To: turnframe.JournalExecuting}}, "executing without attempt"
	case 9:
		w.Phase, what = turnframe.TurnPhase(200), "no such phase"
	case 10:
		w.Begin, what = &turnframe.StoredTurn{Account: "other", ID: turn, Conversation: r.convs[s]}, "begin of another account"
	case 11:
		w.Settle, what = []turnframe.Settlement{{Key: "k0", To: turnframe.JournalCommitted, Attempt: r.attempt[acctKey{acct, "k0"}]}}, "commit with outbox to empty destination"
		w.Outbox = []turnframe.OutboxMessage{{Destination: ""}}
	}
	r.apply("bad write: "+what, w)
}

func (r *runner) opClaim() {
	worker := pick(r, workers)
	limit := pick(r, limits)
	c := r.b()
	now := r.now
	if c&1 != 0 {
		now = now.Add(time.Duration(c) * 5 * time.Millisecond) // claim ahead: NotBefore rows become due
	}
	r.do(fmt.Sprintf("claim worker=%s limit=%d", worker, limit), func(w *world) (any, error) {
		cs, err := w.store.ClaimDue(r.ctx, now, limit, worker)
		w.claims = append(w.claims, cs...)
		return cs, err
	})
}

// claimAt returns the claim the byte picks: one held (or lost: every claim
// ever handed out stays in the list), or a forged one.
func claimAt(w *world, c byte) turnframe.Claim {
	if len(w.claims) == 0 {
		return turnframe.Claim{Worker: "w1"}
	}
	cl := w.claims[int(c)%len(w.claims)]
	switch c >> 6 {
	case 2:
		cl.Worker = "w-forged"
	case 3:
		cl.Attempts++
	}
	return cl
}

func (r *runner) settlement(c, k byte) func(w *world) turnframe.OutboxSettlement {
	to := []turnframe.OutboxStatus{turnframe.OutboxCompleted, turnframe.OutboxPending, turnframe.OutboxFailed, turnframe.OutboxOutcomeUnknown, turnframe.OutboxDispatching}[int(k)%5]
	now := r.now
	return func(w *world) turnframe.OutboxSettlement {
		st := turnframe.OutboxSettlement{Claim: claimAt(w, c), To: to, Now: now}
		switch to {
		case turnframe.OutboxCompleted, turnframe.OutboxOutcomeUnknown:
			st.RemoteRef = "ref"
		case turnframe.OutboxPending:
			st.Code, st.RetryAt = "retry", now.Add(time.Duration(k>>3)*7*time.Millisecond)
		case turnframe.OutboxFailed:
			st.Code = "fail"
		}
		return st
	}
}

func (r *runner) opSettleOne() {
	c, k := r.b(), r.b()
	mk := r.settlement(c, k)
	r.do(fmt.Sprintf("settle claim=%d kind=%d", c, k%5), func(w *world) (any, error) {
		st := mk(w)
		var err error
		switch st.To {
		case turnframe.OutboxCompleted:
			err = w.store.Complete(r.ctx, st.Claim, st.RemoteRef, st.Now)
		case turnframe.OutboxPending:
			err = w.store.Retry(r.ctx, st.Claim, st.Code, st.RetryAt)
		case turnframe.OutboxFailed:
			err = w.store.Fail(r.ctx, st.Claim, st.Code, st.Now)
		case turnframe.OutboxOutcomeUnknown:
			err = w.store.MarkUnknown(r.ctx, st.Claim, st.RemoteRef, st.Now)
		default: // a status a claim does not settle to: only Settle takes it
			res, err := w.store.Settle(r.ctx, []turnframe.OutboxSettlement{st})
			classes := make([]string, len(res))
			for i, e := range res {
				classes[i] = errClass(e)
			}
			return classes, err
		}
		return nil, err
	})
}

func (r *runner) opSettleBatch() {
	n := 1 + int(r.b())%4
	mks := make([]func(*world) turnframe.OutboxSettlement, n)
	for i := range mks {
		mks[i] = r.settlement(r.b(), r.b())
	}
	r.do(fmt.Sprintf("settle batch n=%d", n), func(w *world) (any, error) {
		sts := make([]turnframe.OutboxSettlement, n)
		for i, mk := range mks {
			sts[i] = mk(w)
		}
		res, err := w.store.Settle(r.ctx, sts)
		classes := make([]string, len(res))
		for i, e := range res {
			classes[i] = errClass(e)
		}
		return classes, err
	})
}

func (r *runner) opRelease() {
	cut := r.cutoff()
	r.do("release expired claims", func(w *world) (any, error) {
		ids, err := w.store.ReleaseExpiredClaims(r.ctx, cut)
		// The contract fixes no order for the released ids.
		out := make([]string, len(ids))
		for i, id := range ids {
			out[i] = w.norm(id)
		}
		slices.Sort(out)
		return out, err
	})
}

// outboxAt returns the row id the byte picks, the zero id, or an id no
// store has.
func outboxAt(w *world, c byte, unknown turnframe.OutboxID) turnframe.OutboxID {
	switch {
	case c == 0xff:
		return turnframe.OutboxID{}
	case c == 0xfe || len(w.outbox) == 0:
		return unknown
	}
	return w.outbox[int(c)%len(w.outbox)]
}

func (r *runner) opResolveOrRequeue() {
	c, v := r.b(), r.b()
	unknown := r.ids.OutboxID(r.now)
	if v&0x80 != 0 {
		at := r.now.Add(time.Duration(v&0x1f) * time.Millisecond)
		r.do(fmt.Sprintf("requeue row=%d", c), func(w *world) (any, error) {
			return nil, w.store.Requeue(r.ctx, outboxAt(w, c, unknown), at)
		})
		return
	}
	verdict := turnframe.Verdict(v % 5)
	r.do(fmt.Sprintf("resolve row=%d verdict=%v", c, verdict), func(w *world) (any, error) {
		return nil, w.store.Resolve(r.ctx, outboxAt(w, c, unknown), verdict, "why", r.now)
	})
}

func (r *runner) opPrune() {
	cut := r.cutoff()
	r.do("prune", func(w *world) (any, error) { return w.store.Prune(r.ctx, cut) })
}

func (r *runner) opRead() {
	s, acct, turn := r.slot()
	c := r.b()
	ctx := r.ctx
	switch c % 12 {
	case 0:
		r.do("ForTurn", func(w *world) (any, error) { return w.store.ForTurn(ctx, acct, turn) })
	case 1:
		key := r.keyOf(s)
		r.do("ByKey "+string(key), func(w *world) (any, error) { return w.store.ByKey(ctx, acct, key) })
	case 2:
		r.do("EventsByID", func(w *world) (any, error) {
			ids := slices.Clone(w.events)
			slices.Reverse(ids) // asked out of order: answered in append order
			return w.store.EventsByID(ctx, acct, ids)
		})
	case 3:
		cs, since, limit := pick(r, cases), turnframe.CaseRevision(r.b()%4), pick(r, limits)
		r.do(fmt.Sprintf("EventsSince %s %d %d", cs, since, limit), func(w *world) (any, error) { return w.store.EventsSince(ctx, acct, cs, since, limit) })
	case 4:
		cs := pick(r, cases)
		r.do("CaseRevision "+string(cs), func(w *world) (any, error) { return w.store.CaseRevision(ctx, acct, cs) })
	case 5:
		d := r.b()
		f := turnframe.OutboxFilter{Status: turnframe.OutboxStatus(d % 7), Limit: pick(r, limits)}
		if d&0x80 != 0 {
			f.Account = acct
		}
		r.do(fmt.Sprintf("ListOutbox %+v", f), func(w *world) (any, error) { return w.store.ListOutbox(ctx, f) })
	case 6:
		d := r.b()
		scope := turnframe.RecoveryScope{}
		if d&1 != 0 {
			scope.Account = acct
		}
		if d&2 != 0 {
			scope.UpdatedBefore = r.cutoff()
		}
		limit := pick(r, limits)
		r.do(fmt.Sprintf("ListUnfinishedTurns %+v %d", scope, limit), func(w *world) (any, error) { return w.store.ListUnfinishedTurns(ctx, scope, limit) })
	case 7:
		d := r.b()
		unknown := r.ids.OutboxID(r.now)
		r.do("GetOutbox", func(w *world) (any, error) { return w.store.GetOutbox(ctx, outboxAt(w, d, unknown)) })
	case 8:
		r.do("TurnPhase", func(w *world) (any, error) { return w.store.TurnPhase(ctx, acct, turn) })
	case 9:
		r.do("Replay", func(w *world) (any, error) { return w.store.Replay(ctx, acct, turn) })
	case 10:
		r.do("LoadTurn", func(w *world) (any, error) { return w.store.LoadTurn(ctx, acct, turn) })
	case 11:
		r.do("ByKey bad", func(w *world) (any, error) { return w.store.ByKey(ctx, acct, "") })
	}
}

// compareFinal compares everything both stores hold.
func (r *runner) compareFinal() {
	r.t.Helper()
	ctx := r.ctx
	r.do("final ListOutbox", func(w *world) (any, error) {
		return w.store.ListOutbox(ctx, turnframe.OutboxFilter{Limit: turnframe.MaxLimit})
	})
	r.do("final ListUnfinishedTurns", func(w *world) (any, error) {
		return w.store.ListUnfinishedTurns(ctx, turnframe.RecoveryScope{}, turnframe.MaxLimit)
	})
	for _, acct := range accounts {
		for s, turn := range r.turns {
			r.do(fmt.Sprintf("final turn %s/%d", acct, s), func(w *world) (any, error) {
				m, err := w.store.TurnPhase(ctx, acct, turn)
				if err != nil {
					return nil, err
				}
				st, err := w.store.LoadTurn(ctx, acct, turn)
				if err != nil {
					return nil, fmt.Errorf("load turn after phase: %w", err)
				}
				rep, rerr := w.store.Replay(ctx, acct, turn)
				entries, err := w.store.ForTurn(ctx, acct, turn)
				return "marker=" + dump(m) + " turn=" + dump(st) + " replay=" + errClass(rerr) + dump(rep) + " entries=" + dump(entries), err
			})
		}
		for _, key := range keys {
			r.do(fmt.Sprintf("final key %s/%s", acct, key), func(w *world) (any, error) { return w.store.ByKey(ctx, acct, key) })
		}
		for _, cs := range cases {
			r.do(fmt.Sprintf("final case %s/%s", acct, cs), func(w *world) (any, error) {
				rev, err := w.store.CaseRevision(ctx, acct, cs)
				if err != nil {
					return nil, err
				}
				evs, err := w.store.EventsSince(ctx, acct, cs, 0, turnframe.MaxLimit)
				return fmt.Sprintf("rev=%d ", rev) + dump(evs), err
			})
		}
		r.do("final events by id "+string(acct), func(w *world) (any, error) { return w.store.EventsByID(ctx, acct, w.events) })
	}
	r.do("final rows one by one", func(w *world) (any, error) {
		var out []string
		for _, id := range w.outbox {
			rec, err := w.store.GetOutbox(ctx, id)
			out = append(out, errClass(err)+" "+dump(rec))
		}
		return out, nil
	})
}

// compareClosed closes every store and checks that each method then says
// ErrClosed.
func (r *runner) compareClosed() {
	r.t.Helper()
	ctx := r.ctx
	r.do("close", func(w *world) (any, error) { return nil, w.store.Close() })
	acct, turn := accounts[0], r.turns[0]
	r.do("apply after close", func(w *world) (any, error) {
		return w.store.Apply(ctx, turnframe.Write{Account: acct, Turn: turn, Now: r.now, Phase: turnframe.PhaseAbandoned})
	})
	r.do("claim after close", func(w *world) (any, error) { return w.store.ClaimDue(ctx, r.now, 1, "w1") })
	r.do("read after close", func(w *world) (any, error) { return w.store.TurnPhase(ctx, acct, turn) })
	r.do("list after close", func(w *world) (any, error) {
		return w.store.ListOutbox(ctx, turnframe.OutboxFilter{Limit: 1})
	})
}
