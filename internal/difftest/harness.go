package difftest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"regexp"
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
	{"Busy", turnframe.ErrBusy},
	{"Canceled", context.Canceled},
	{"Deadline", context.DeadlineExceeded},
}

// errClass names the sentinels err wraps: "ok" for nil, "other" for an error
// that wraps none (a store's own failure, which the stores must not differ
// on either). An ErrInvalid must also be an *InvalidError naming its field.
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
	if errors.Is(err, turnframe.ErrInvalid) {
		var ie *turnframe.InvalidError
		if !errors.As(err, &ie) || ie.Field == "" {
			names = append(names, "unnamed")
		}
	}
	return strings.Join(names, "|")
}

// Fixed universe the decoder picks from: small, so that keys, cases and
// order keys collide often. The keys "k", "k/1" and "k/2" are those the
// first row-key scheme made collide: command "k" with two rows got "k/1" and
// "k/2", the keys of two other commands. Every key here is valid.
var (
	accounts  = []turnframe.AccountID{"acct-a", "acct-b"}
	keys      = []turnframe.IdempotencyKey{"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9", "k10", "k11", "k", "k/1", "k/2", "k 1", "ключ"}
	cases     = []turnframe.CaseKey{"c0", "c1", "c2"}
	names     = []string{"book", "pay"}
	payloads  = [][]byte{nil, []byte("x"), []byte("y")}
	workers   = []string{"w1", "w2", "w3"}
	dests     = []string{"payments", "mail"}
	orderKeys = []string{"", "o1", "o2"}
	texts     = []string{"", "book a seat? and pay", "héllo wörld? ok"}
	limits    = []int{1, 2, 3, 16, 0, -1, turnframe.MaxLimit + 1}
	// badKeys are keys every entry point refuses: the row-key separator, a
	// control character (inside or at an end), white space at either end.
	badKeys = []turnframe.IdempotencyKey{"k~1", "k\t1", " k", "k ", "k\n", "k\x00", "k\u00a0", "\u0085k"}
)

// commandFor is the one command the key k (an index into keys) stands for,
// so that admitting a key twice is, by default, the same command.
func commandFor(k int) turnframe.Command {
	return turnframe.Command{Key: keys[k], Case: cases[k%len(cases)], Name: names[k%len(names)], Payload: payloads[k%len(payloads)]}
}

// specialTimes are the edges of the time range every store method takes:
// out of range on either side (by a nanosecond too, which a store that
// truncated before it checked would accept), and the two edges themselves.
var specialTimes = []struct {
	name string
	t    time.Time
}{
	{"epoch", time.Unix(0, 0).UTC()},
	{"min-1ns", turnframe.MinTime.Add(-time.Nanosecond)},
	{"min", turnframe.MinTime},
	{"1969", time.Date(1969, 12, 31, 23, 59, 59, 0, time.UTC)},
	{"max", turnframe.MaxTime},
	{"max+1ns", turnframe.MaxTime.Add(time.Nanosecond)},
	{"max+1us", turnframe.MaxTime.Add(time.Microsecond)},
	{"year10000", time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
}

// outOfRange reports whether t is a time every store must refuse.
func outOfRange(t time.Time) bool { return t.Before(turnframe.MinTime) || t.After(turnframe.MaxTime) }

var zone = time.FixedZone("UTC+5:30", 5*3600+30*60)

// leaseChoices are the leases the decoder draws: from one microsecond (ended
// by the next op) to an hour (live for the whole input).
var leaseChoices = []time.Duration{time.Microsecond, 5 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 300 * time.Millisecond, time.Second, time.Hour}

// lease draws a lease: mostly one of leaseChoices plus a fraction of a
// microsecond (which the lease end must drop alike), now and then zero or
// negative (ErrInvalid) or the longest Go holds (valid: it ends in 2323).
func lease(c byte) time.Duration {
	switch c {
	case 0xff:
		return 0
	case 0xfe:
		return -time.Millisecond
	case 0xfd:
		return math.MaxInt64
	}
	return leaseChoices[c&7] + time.Duration(c>>3&7)*333*time.Nanosecond
}

const turnSlots = 6

var epoch = time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)

type acctKey struct {
	acct turnframe.AccountID
	key  turnframe.IdempotencyKey
}

// runner decodes fuzz input into operations and runs each on every world.
type runner struct {
	t      testing.TB
	ctx    context.Context
	worlds []*world
	in     []byte
	pos    int
	now    time.Time
	ops    int
	log    []string
	past   []time.Time // the clock at every op so far: cut-offs land on them exactly
	// leaseEnds are the ends of every lease a store granted (claims,
	// extensions, takes), in order: times drawn around them test "ended
	// at" against "ended before".
	leaseEnds []time.Time

	// stats, when not nil, counts each op's first word and error class,
	// and the finer outcomes the ops note (TestDecoderReachesRealFlows).
	stats map[string]int
	// afterOps, when not nil, runs after the last op, before the final
	// comparison: a test's own checks of the stores.
	afterOps func()

	ids       *turnframe.IDGenerator // the harness's own ids: turns, conversations, attempts
	slotTurns [turnSlots][]turnframe.TurnID
	convs     [turnSlots]turnframe.ConversationID
	allTurns  []turnframe.TurnID // every turn id the harness made, for the final comparison

	// attempts lists, per key, every attempt that took it, in order: the
	// last is the one that holds it, the others are superseded.
	attempts map[acctKey][]turnframe.AttemptID
}

const maxOps = 400

// trace logs every operation and the first store's answer
// (DIFFTEST_TRACE=1 go test -run … -v), to see what an input exercises.
var trace = os.Getenv("DIFFTEST_TRACE") != ""

func newRunner(t testing.TB, in []byte, worlds []*world) *runner {
	r := &runner{
		t: t, ctx: context.Background(), worlds: worlds, in: in, now: epoch,
		ids:      turnframe.NewIDGeneratorFrom(rand.NewChaCha8([32]byte{1})),
		attempts: make(map[acctKey][]turnframe.AttemptID),
	}
	for i := range turnSlots {
		id := r.ids.TurnID(epoch.Add(time.Duration(i) * time.Millisecond))
		r.slotTurns[i] = []turnframe.TurnID{id}
		r.allTurns = append(r.allTurns, id)
		r.convs[i] = r.ids.ConversationID(epoch)
	}
	return r
}

func (r *runner) more() bool { return r.pos < len(r.in) && r.ops < maxOps }

// b returns the next input byte, 0 once the input is spent. Only the
// decoder calls it, never a closure run per world: both worlds get the same
// operations.
func (r *runner) b() byte {
	if r.pos >= len(r.in) {
		return 0
	}
	c := r.in[r.pos]
	r.pos++
	return c
}

func pick[T any](r *runner, xs []T) T { return xs[int(r.b())%len(xs)] }

// note counts an outcome for TestDecoderReachesRealFlows.
func (r *runner) note(label string) {
	if r.stats != nil {
		r.stats[label]++
	}
}

// mem is the first world's store (memstore), which the decoder reads to
// steer towards writes that can succeed: reads change nothing, and both
// worlds get the same input whatever it says.
func (r *runner) mem() turnframe.Store { return r.worlds[0].store }

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
	if r.stats != nil {
		r.stats[strings.Fields(desc)[0]+" "+errClass(errs[0])]++
	}
	if trace {
		r.t.Logf("%s -> %.300s", desc, outs[0])
	}
	for i := range outs {
		if strings.Contains(outs[i], "unnamed") {
			r.t.Fatalf("%s: an ErrInvalid that is not an *InvalidError naming its field at op %s: %v\nops so far:\n%s",
				r.worlds[i].name, desc, errs[i], strings.Join(r.log, "\n"))
		}
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

// timeAt draws the time of an op from c: mostly base; now and then one of
// the last lease ends a store granted, a microsecond before it, at it or a
// microsecond after it; base in another zone (which must read back in UTC);
// or one of specialTimes, mostly out of range. It returns a label for the
// op's description.
func (r *runner) timeAt(c byte, base time.Time) (time.Time, string) {
	switch {
	case c >= 0xf8:
		s := specialTimes[c-0xf8]
		return s.t, "@" + s.name
	case c >= 0xf0:
		return base.In(zone), "@zoned"
	case c >= 0xc0 && len(r.leaseEnds) > 0:
		end := r.leaseEnds[len(r.leaseEnds)-1-int(c>>2&7)%len(r.leaseEnds)]
		switch c & 3 {
		case 0:
			return end.Add(-time.Microsecond), "@end-1us"
		case 3:
			return end.Add(time.Microsecond), "@end+1us"
		}
		return end, "@end"
	}
	return base, ""
}

// noteLease records a lease end a store granted.
func (r *runner) noteLease(t time.Time) {
	if !t.IsZero() {
		r.leaseEnds = append(r.leaseEnds, t)
	}
}

// slot picks a turn slot, its account and a turn: mostly the slot's current
// turn, now and then an earlier one (one a re-plan left behind, abandoned
// perhaps), and now and then through the other tenant (ErrNotFound). Mostly
// it steers away from a turn that does not exist.
func (r *runner) slot() (int, turnframe.AccountID, turnframe.TurnID) {
	return r.slotWhere(func(acct turnframe.AccountID, turn turnframe.TurnID) bool {
		return r.phase(acct, turn) != turnframe.PhaseUnset
	})
}

// busySlot is slot steering towards a turn that is not abandoned and holds
// a pending entry: where takes, runs and commits can succeed.
func (r *runner) busySlot() (int, turnframe.AccountID, turnframe.TurnID) {
	return r.slotWhere(func(acct turnframe.AccountID, turn turnframe.TurnID) bool {
		return r.phase(acct, turn) != turnframe.PhaseAbandoned && r.holdsPending(acct, turn)
	})
}

// withStatus returns the keys of the turn's entries in status st.
func (r *runner) withStatus(acct turnframe.AccountID, turn turnframe.TurnID, st turnframe.JournalStatus) []turnframe.IdempotencyKey {
	var ks []turnframe.IdempotencyKey
	for _, e := range r.entries(acct, turn) {
		if e.Status == st {
			ks = append(ks, e.Key)
		}
	}
	return ks
}

// holdsPending reports whether the turn holds a Pending or Executing entry.
func (r *runner) holdsPending(acct turnframe.AccountID, turn turnframe.TurnID) bool {
	for _, e := range r.entries(acct, turn) {
		if e.Status.IsPending() {
			return true
		}
	}
	return false
}

func (r *runner) slotWhere(good func(turnframe.AccountID, turnframe.TurnID) bool) (int, turnframe.AccountID, turnframe.TurnID) {
	c := r.b()
	s := int(c) % turnSlots
	acct := accounts[s%len(accounts)]
	if c&0xe0 == 0xe0 {
		acct = accounts[(s+1)%len(accounts)]
	}
	hist := r.slotTurns[s]
	turn := hist[len(hist)-1]
	if c&0x18 == 0x18 && len(hist) > 1 {
		return s, acct, hist[int(c>>5)%(len(hist)-1)]
	}
	if c&0x07 == 0x07 || acct != accounts[s%len(accounts)] {
		return s, acct, turn
	}
	// The first slot of the account, from this one on, whose turn is good;
	// or else the latest good turn any slot of the account held.
	for i := 0; i < turnSlots; i += len(accounts) {
		s2 := (s + i) % turnSlots
		t2 := r.slotTurns[s2][len(r.slotTurns[s2])-1]
		if good(acct, t2) {
			return s2, acct, t2
		}
	}
	for i := 0; i < turnSlots; i += len(accounts) {
		s2 := (s + i) % turnSlots
		for j := len(r.slotTurns[s2]) - 2; j >= 0; j-- {
			if t2 := r.slotTurns[s2][j]; good(acct, t2) {
				return s2, acct, t2
			}
		}
	}
	return s, acct, turn
}

// entries returns what the first world holds for a turn: its entries, in
// admission order.
func (r *runner) entries(acct turnframe.AccountID, turn turnframe.TurnID) []turnframe.JournalEntry {
	es, _ := r.mem().ForTurn(r.ctx, acct, turn)
	return es
}

func (r *runner) phase(acct turnframe.AccountID, turn turnframe.TurnID) turnframe.TurnPhase {
	m, err := r.mem().TurnPhase(r.ctx, acct, turn)
	if err != nil {
		return turnframe.PhaseUnset
	}
	return m.Phase
}

func (r *runner) entry(acct turnframe.AccountID, key turnframe.IdempotencyKey) (turnframe.JournalEntry, bool) {
	e, err := r.mem().ByKey(r.ctx, acct, key)
	return e, err == nil
}

// keyOf picks one of the keys the turn holds (mostly one still pending, if
// any), or now and then any key of the universe.
func (r *runner) keyOf(acct turnframe.AccountID, turn turnframe.TurnID) turnframe.IdempotencyKey {
	c := r.b()
	es := r.entries(acct, turn)
	if c&0x10 == 0 { // mostly one still pending, if any
		var pending []turnframe.JournalEntry
		for _, e := range es {
			if e.Status.IsPending() {
				pending = append(pending, e)
			}
		}
		if len(pending) > 0 {
			es = pending
		}
	}
	if len(es) == 0 || c&0xe0 == 0xe0 {
		return keys[int(c)%len(keys)]
	}
	return es[int(c)%len(es)].Key
}

// current is the attempt that holds (or last held) key, as the first world
// says: the Prior a correct take presents.
func (r *runner) current(acct turnframe.AccountID, key turnframe.IdempotencyKey) turnframe.AttemptID {
	e, _ := r.entry(acct, key)
	return e.Attempt
}

// attemptFor returns, by c, the attempt that runs key (most often), one it
// superseded, one that never ran, or none (a reconciliation's shape).
func (r *runner) attemptFor(acct turnframe.AccountID, key turnframe.IdempotencyKey, c byte) (turnframe.AttemptID, string) {
	hist := r.attempts[acctKey{acct, key}]
	switch c & 0xe0 {
	case 0xe0:
		return r.ids.AttemptID(r.now), "fresh"
	case 0xc0:
		if len(hist) > 1 {
			return hist[int(c)%(len(hist)-1)], "superseded"
		}
	case 0xa0:
		return turnframe.AttemptID{}, "none"
	}
	return r.current(acct, key), "current"
}

func (r *runner) apply(desc string, w turnframe.Write) ([]any, []error) {
	r.t.Helper()
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
		for _, e := range a.Settled {
			if e.Status != turnframe.JournalExecuting {
				continue
			}
			ak := acctKey{e.Account, e.Key}
			if h := r.attempts[ak]; len(h) == 0 || h[len(h)-1] != e.Attempt {
				r.attempts[ak] = append(h, e.Attempt)
			}
			r.noteLease(e.LeaseUntil)
		}
		if len(a.Outbox) > 0 {
			r.note("outbox rows " + map[bool]string{true: "several", false: "one"}[len(a.Outbox) > 1])
		}
		if a.Redelivered != nil {
			r.note("redelivered")
		}
	}
	return vals, errs
}

// checkRowKeys checks on every world that no two outbox rows of an account
// share a key: the row-key rule of issue 11. The runner checks after every
// op and at the end.
func (r *runner) checkRowKeys(desc string) {
	r.t.Helper()
	for _, w := range r.worlds {
		rows, err := w.store.ListOutbox(r.ctx, turnframe.OutboxFilter{Limit: turnframe.MaxLimit})
		if err != nil {
			r.t.Fatalf("%s: list outbox after %s: %v", w.name, desc, err)
		}
		seen := make(map[acctKey]turnframe.OutboxID, len(rows))
		for _, row := range rows {
			ak := acctKey{row.Account, row.Key}
			if other, ok := seen[ak]; ok {
				r.t.Fatalf("%s: after %s, rows %v and %v of account %q share the key %q\nops so far:\n%s",
					w.name, desc, other, row.ID, row.Account, row.Key, strings.Join(r.log, "\n"))
			}
			seen[ak] = row.ID
		}
		if r.stats != nil && w == r.worlds[0] {
			// A row "k~n" of a command beside a row of a command keyed
			// "k/n": the first scheme gave both the key "k/n".
			for ak := range seen {
				if i := strings.LastIndexByte(string(ak.key), turnframe.OutboxKeySeparator); i > 0 {
					old := ak.key[:i] + "/" + ak.key[i+1:]
					if _, ok := seen[acctKey{ak.acct, old}]; ok {
						r.note("old scheme would collide")
					}
				}
			}
		}
	}
}

func (r *runner) run() {
	r.t.Helper()
	// Every slot starts with its turn received, so that the ops of even a
	// short input reach turns that exist.
	for s := range turnSlots {
		acct, turn := accounts[s%len(accounts)], r.slotTurns[s][0]
		r.apply(fmt.Sprintf("setup slot=%d", s), turnframe.Write{Account: acct, Turn: turn, Now: r.now,
			Begin: &turnframe.StoredTurn{Account: acct, ID: turn, Conversation: r.convs[s], Text: texts[s%len(texts)], ReceivedAt: r.now}})
	}
	for r.more() {
		r.tick()
		r.step(r.b())
		r.ops++
		r.checkRowKeys(r.log[len(r.log)-1])
	}
	if r.afterOps != nil {
		r.afterOps()
	}
	r.compareFinal()
	r.compareClosed()
}

func (r *runner) step(op byte) {
	switch op % 37 {
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
		r.opExpire()
	case 16:
		r.opResolveOrRequeue()
	case 17:
		r.opPrune()
	case 18, 19:
		r.opRead()
	case 20, 21, 22, 23:
		r.opRun()
	case 24:
		r.opExtend()
	case 25:
		r.opReleaseClaim()
	case 26:
		r.opReplan()
	case 27:
		r.opResendAbandoned()
	case 28:
		r.opPages()
	case 29:
		r.opExhaustRequeue()
	case 30:
		r.opTakeOver()
	case 31:
		r.opBadCall()
	case 32:
		r.opEvidence()
	case 33:
		r.opPages13()
	case 34:
		r.opIntervene()
	case 35:
		r.opRowIntervene()
	case 36:
		r.opDecide()
	}
}
