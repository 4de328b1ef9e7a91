package difftest

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/storetest"
)

// This file holds the operations the decoder runs: each reads its
// parameters from the input, then runs the same call on every world.

// opBegin begins a turn: the slot's own, or, when that one exists, now and
// then a fresh one (the slot's next message); or the same turn again
// (ErrConflict).
func (r *runner) opBegin() {
	s, acct, turn := r.slot()
	c := r.b()
	if c&0x04 != 0 && acct == accounts[s%len(accounts)] && r.phase(acct, turn) != turnframe.PhaseUnset {
		turn = r.ids.TurnID(r.now)
		r.slotTurns[s] = append(r.slotTurns[s], turn)
		r.allTurns = append(r.allTurns, turn)
	}
	text := texts[int(c)%len(texts)]
	conv := r.convs[s]
	switch c >> 4 {
	case 0xe:
		conv = turnframe.ConversationID{}
	case 0xf:
		text = "bad \xff utf8"
	}
	// Now and then under a channel's message id, of which each slot has
	// three: the same id again with the same text is a redelivery (nothing
	// written), with another text ErrConflict.
	var msg turnframe.MessageID
	if c&0x03 != 0 {
		msg = turnframe.MessageID(fmt.Sprintf("m-%d-%d", s, c&0x03))
	}
	w := turnframe.Write{
		Account: acct, Turn: turn, Now: r.now,
		Begin: &turnframe.StoredTurn{Account: acct, ID: turn, Conversation: conv, Text: text, MessageID: msg, ReceivedAt: r.now},
	}
	if c&0x18 != 0 { // begin and plan in one write
		w.Phase = turnframe.PhasePlanned
		w.Admit = r.commands()
	}
	r.apply(fmt.Sprintf("begin slot=%d acct=%s text=%q msg=%q admit=%v", s, acct, text, msg, keysOf(w.Admit)), w)
}

// commands draws 1–3 commands: each the one command its key stands for;
// now and then the key reused for another command (ErrConflict), or a key
// every store must refuse (ErrInvalid).
func (r *runner) commands() []turnframe.Command {
	n := 1 + int(r.b())%3
	cmds := make([]turnframe.Command, 0, n)
	for range n {
		c := r.b()
		cmd := commandFor(int(c) % len(keys))
		switch {
		case c&0xe0 == 0xe0:
			cmd.Payload = []byte("other")
		case c&0xf8 == 0xd8:
			cmd.Key = badKeys[c&7]
		case c&0xf0 == 0xc0: // "k", "k/1", "k/2": keys the first row-key scheme made collide
			cmd = commandFor(12 + int(c)%3)
		}
		cmds = append(cmds, cmd)
	}
	return cmds
}

// keysOf lists the commands' keys, quoted (a bad key may hold any byte).
func keysOf(cmds []turnframe.Command) string {
	ks := make([]string, len(cmds))
	for i, c := range cmds {
		ks[i] = fmt.Sprintf("%q", c.Key)
	}
	return "[" + strings.Join(ks, " ") + "]"
}

// noteAdmitted counts, for each key a successful admission returned, whether
// it was new, an existing entry that stands, or an entry of an abandoned
// turn this turn adopted.
func (r *runner) noteAdmitted(turn turnframe.TurnID, before map[turnframe.IdempotencyKey]turnframe.JournalEntry, a turnframe.Applied) {
	for _, e := range a.Admitted {
		old, existed := before[e.Key]
		switch {
		case !existed:
			r.note("admitted new")
		case old.Turn != turn && e.Turn == turn:
			r.note("adopted " + old.Status.String())
		default:
			r.note("admitted existing")
		}
	}
}

// existing returns the entries the first world holds for cmds' keys.
func (r *runner) existing(acct turnframe.AccountID, cmds []turnframe.Command) map[turnframe.IdempotencyKey]turnframe.JournalEntry {
	m := make(map[turnframe.IdempotencyKey]turnframe.JournalEntry)
	for _, c := range cmds {
		if e, ok := r.entry(acct, c.Key); ok {
			m[c.Key] = e
		}
	}
	return m
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
	case 3:
		w.Advance = turnframe.PhasePlanned
	}
	if c&0x80 != 0 {
		w.Replay = r.replay()
	}
	before := r.existing(acct, cmds)
	vals, errs := r.apply(fmt.Sprintf("admit slot=%d acct=%s cmds=%v phase=%v advance=%v", s, acct, keysOf(cmds), w.Phase, w.Advance), w)
	if errs[0] == nil {
		r.noteAdmitted(turn, before, vals[0].(turnframe.Applied))
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

// entryState names the state of an entry as a take sees it at now.
func entryState(e turnframe.JournalEntry, found bool, now time.Time) string {
	switch {
	case !found:
		return "missing"
	case e.Status == turnframe.JournalPending:
		return "pending"
	case e.Status == turnframe.JournalExecuting && e.LeaseUntil.After(now):
		return "live"
	case e.Status == turnframe.JournalExecuting:
		return "ended"
	}
	return "settled"
}

// opExecuting moves an entry to Executing: a new attempt taking it (with
// the Prior it saw, zero, or a stale one), the holder renewing its lease, or
// an attempt re-presented; at now or around the entry's own lease end.
func (r *runner) opExecuting() {
	s, acct, turn := r.busySlot()
	a := r.b()
	key := r.keyOf(acct, turn)
	p, tb, lb := r.b(), r.b(), r.b()
	if a&0x80 == 0 { // mostly an entry an attempt holds, if any: renewals, live and ended leases
		var held []turnframe.IdempotencyKey
		for _, e := range r.entries(acct, turn) {
			if e.Status == turnframe.JournalExecuting {
				held = append(held, e.Key)
			}
		}
		if len(held) > 0 {
			key = held[int(a>>2)%len(held)]
		}
	}
	e, found := r.entry(acct, key)
	st := turnframe.Settlement{Key: key, To: turnframe.JournalExecuting, Lease: lease(lb)}
	var kind string
	switch a % 4 {
	case 0, 1:
		st.Attempt, kind = r.ids.AttemptID(r.now), "new"
	case 2:
		st.Attempt, kind = e.Attempt, "renew"
	case 3:
		st.Attempt, kind = r.attemptFor(acct, key, 0xc0|a)
	}
	if st.Attempt.IsZero() || kind == "current" { // never ran, or no superseded attempt: a new one
		st.Attempt, kind = r.ids.AttemptID(r.now), "new"
	}
	var prior string
	switch p % 4 {
	case 0, 1:
		st.Prior, prior = e.Attempt, "seen"
	case 2:
		st.Prior, prior = turnframe.AttemptID{}, "zero"
	case 3:
		st.Prior, prior = r.attemptFor(acct, key, 0xc0|p)
		if prior != "superseded" {
			st.Prior, prior = r.ids.AttemptID(r.now), "stale"
		}
	}
	now, tl := r.timeAt(tb, r.now)
	if tb&0xc0 == 0x80 && e.Status == turnframe.JournalExecuting { // around this entry's own lease end
		now, tl = e.LeaseUntil.Add(time.Duration(int(tb&3)-1)*time.Microsecond), fmt.Sprintf("@own-end%+dus", int(tb&3)-1)
	}
	w := turnframe.Write{Account: acct, Turn: turn, Now: now, Settle: []turnframe.Settlement{st}}
	switch a & 0x70 {
	case 0x10, 0x20, 0x30:
		w.Advance = turnframe.PhaseExecuting
	case 0x40:
		w.Phase = turnframe.PhaseExecuting
	case 0x50:
		w.Phase, w.Advance = turnframe.PhaseExecuting, turnframe.PhaseExecuting // both: ErrInvalid
	}
	state := entryState(e, found, now)
	if r.phase(acct, turn) == turnframe.PhaseAbandoned {
		state = "abandoned"
	}
	vals, errs := r.apply(fmt.Sprintf("take slot=%d key=%s attempt=%s prior=%s lease=%v state=%s%s", s, key, kind, prior, st.Lease, state, tl), w)
	r.note(fmt.Sprintf("take/%s/%s/%s %s", kind, prior, state, errClass(errs[0])))
	if errs[0] != nil || p&0x80 != 0 {
		return
	}
	// A follow-up on the entry just taken, while its lease runs or once
	// it ended: the holder renewing, or another attempt taking it.
	held := vals[0].(turnframe.Applied).Settled[0]
	end := held.LeaseUntil
	follow := turnframe.Settlement{Key: key, To: turnframe.JournalExecuting, Attempt: r.ids.AttemptID(r.now), Prior: held.Attempt, Lease: st.Lease}
	var what string
	at := now
	switch p >> 4 & 7 {
	case 0, 1:
		follow.Attempt, follow.Prior, what = held.Attempt, turnframe.AttemptID{}, "renew-live"
	case 2:
		what = "take-live"
	case 3:
		at, what = end.Add(-time.Microsecond), "take-before-end"
	case 4, 5:
		at, what = end, "take-at-end"
	case 6:
		follow.Attempt, follow.Prior, at, what = held.Attempt, turnframe.AttemptID{}, end, "renew-at-end"
	case 7:
		follow.Prior, at, what = turnframe.AttemptID{}, end, "take-at-end-zero-prior"
	}
	_, errs = r.apply(fmt.Sprintf("take/follow %s key=%s", what, key), turnframe.Write{Account: acct, Turn: turn, Now: at, Settle: []turnframe.Settlement{follow}})
	r.note(fmt.Sprintf("take/follow/%s %s", what, errClass(errs[0])))
}

func (r *runner) opCommit() {
	s, acct, turn := r.busySlot()
	key := r.keyOf(acct, turn)
	c := r.b()
	cs := cases[int(c)%len(cases)]
	if e, ok := r.entry(acct, key); ok && c&0x1c != 0x1c {
		cs = e.Case
	}
	att, kind := r.attemptFor(acct, key, c)
	st := turnframe.Settlement{Key: key, To: turnframe.JournalCommitted, Attempt: att}
	if kind == "fresh" && c&1 == 1 {
		// A local attempt (WithLocalCommand): a Pending entry settled
		// without a take, naming the attempt it was seen under.
		st.Prior, kind = r.current(acct, key), "fresh-local"
	}
	w := turnframe.Write{Account: acct, Turn: turn, Now: r.now, Settle: []turnframe.Settlement{st}}
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
		case 3:
			switch d & 0x3f {
			case 0x3f:
				m.NotBefore = turnframe.MaxTime.Add(time.Microsecond) // ErrInvalid
			case 0x3e:
				m.NotBefore = turnframe.MaxTime // valid, and never due
			case 0x3d:
				m.NotBefore = r.now.In(zone)
			}
		}
		w.Outbox = append(w.Outbox, m)
	}
	e := r.b()
	if e&7 == 0 {
		w.Expect = map[turnframe.CaseKey]turnframe.CaseRevision{cs: turnframe.CaseRevision(e>>3) % 3}
	}
	switch e & 0x30 {
	case 0x30:
		w.Phase = turnframe.PhaseCommitted
	case 0x20:
		w.Advance = turnframe.PhaseCommitted
	}
	r.apply(fmt.Sprintf("commit slot=%d key=%s attempt=%s events=%d outbox=%d expect=%v phase=%v advance=%v",
		s, key, kind, len(w.Events), len(w.Outbox), w.Expect, w.Phase, w.Advance), w)
}

// opRun does what Runtime.Execute does for one command: a take under a new
// attempt (a compare-and-set on the attempt it saw, leased, advancing the
// turn to Executing), then a write with its outcome advancing the turn to
// Committed if it may.
func (r *runner) opRun() {
	s, acct, turn := r.busySlot()
	key := r.keyOf(acct, turn)
	c, l := r.b(), r.b()
	// A turn with nothing pending admits a command and takes it in one
	// write (an adopted one included).
	var admit []turnframe.Command
	if ph := r.phase(acct, turn); ph != turnframe.PhaseUnset && !ph.IsTerminal() && !r.holdsPending(acct, turn) {
		admit = r.commands()
		key = admit[0].Key
	}
	att := r.ids.AttemptID(r.now)
	take := turnframe.Write{Account: acct, Turn: turn, Now: r.now, Admit: admit,
		Settle: []turnframe.Settlement{{Key: key, To: turnframe.JournalExecuting, Attempt: att, Prior: r.current(acct, key), Lease: lease(l)}}}
	if r.phase(acct, turn) < turnframe.PhaseExecuting {
		take.Advance = turnframe.PhaseExecuting
	}
	before := r.existing(acct, admit)
	vals, errs := r.apply(fmt.Sprintf("run/take slot=%d key=%s lease=%v admit=%v", s, key, lease(l), keysOf(admit)), take)
	if errs[0] == nil && len(admit) > 0 {
		r.note("run/admit-and-take ok")
		r.noteAdmitted(turn, before, vals[0].(turnframe.Applied))
	}
	if errs[0] != nil {
		return
	}
	w := turnframe.Write{Account: acct, Turn: turn, Now: r.now}
	if c&0x60 != 0x60 {
		w.Advance = turnframe.PhaseCommitted
	}
	st := turnframe.Settlement{Key: key, Attempt: att}
	switch c % 8 {
	case 0:
		st.To, st.Code = turnframe.JournalRejected, "refused"
	case 1:
		st.To, st.RemoteRef = turnframe.JournalOutcomeUnknown, "ref-9"
	default:
		st.To = turnframe.JournalCommitted
		cs := cases[0]
		if e, ok := r.entry(acct, key); ok {
			cs = e.Case
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
	vals, errs = r.apply(fmt.Sprintf("run/outcome slot=%d key=%s to=%v outbox=%d advance=%v", s, key, st.To, len(w.Outbox), w.Advance), w)
	if errs[0] == nil && w.Advance != turnframe.PhaseUnset {
		if vals[0].(turnframe.Applied).Phase == turnframe.PhaseCommitted {
			r.note("advance moved")
		} else {
			r.note("advance skipped")
		}
	}
}

// opRejectOrUnknown settles an entry from Executing by an attempt: the one
// that holds it, one it superseded, one that never ran, or none.
func (r *runner) opRejectOrUnknown() {
	s, acct, turn := r.busySlot()
	key := r.keyOf(acct, turn)
	c := r.b()
	att, kind := r.attemptFor(acct, key, c)
	st := turnframe.Settlement{Key: key, To: turnframe.JournalRejected, Attempt: att, Code: "no-seat"}
	if c&1 != 0 {
		st.To, st.Code, st.RemoteRef = turnframe.JournalOutcomeUnknown, "", "ref-1"
	}
	w := turnframe.Write{Account: acct, Turn: turn, Now: r.now, Settle: []turnframe.Settlement{st}}
	switch c & 6 {
	case 2:
		w.Phase = turnframe.PhaseCommitted
	case 4:
		w.Advance = turnframe.PhaseCommitted
	}
	e, found := r.entry(acct, key)
	_, errs := r.apply(fmt.Sprintf("outcome slot=%d key=%s to=%v attempt=%s phase=%v advance=%v", s, key, st.To, kind, w.Phase, w.Advance), w)
	r.note(fmt.Sprintf("outcome/%s/%s %s", kind, entryState(e, found, r.now), errClass(errs[0])))
}

// opReconcile moves an entry as a reconciliation does (no attempt), or with
// an attempt (which only the holder of an Executing entry may present), as
// one of the actors (c>>6), now and then escalating it (l&7 == 7). It
// steers to the entries a reconciliation is for: outcome unknown, needs
// intervention, attempts whose lease ended (declared unknown) and attempts
// stranded on an abandoned turn (settled once the lease ended), now and
// then at a microsecond before the entry's lease end or exactly at it.
func (r *runner) opReconcile() {
	s, acct, turn := r.slotWhere(func(acct turnframe.AccountID, turn turnframe.TurnID) bool {
		return len(r.reconcilable(acct, turn)) > 0
	})
	key := r.keyOf(acct, turn)
	c, l := r.b(), r.b()
	if ks := r.reconcilable(acct, turn); len(ks) > 0 && l&0x80 == 0 {
		key = ks[int(l>>3)%len(ks)] // mostly an entry a reconciliation is for
	}
	to := []turnframe.JournalStatus{turnframe.JournalCommitted, turnframe.JournalRejected, turnframe.JournalPending, turnframe.JournalExecuting}[c%4]
	if to == turnframe.JournalExecuting && c&0x20 != 0 {
		to = turnframe.JournalOutcomeUnknown // a reconciliation's move only once the attempt's lease ended
	}
	if l&7 == 7 {
		to = turnframe.JournalNeedsIntervention // an escalation: from outcome unknown only
	}
	actor := reconcilers[c>>6]
	st := turnframe.Settlement{Key: key, To: to}
	switch to {
	case turnframe.JournalOutcomeUnknown:
		st.Code = turnframe.CodeLeaseEnded
	case turnframe.JournalNeedsIntervention:
		st.Code = turnframe.CodeNoSafeResolution
	case turnframe.JournalCommitted:
		if l&0x40 != 0 {
			st.RemoteRef = "ref-r" // what the remote said, kept on the entry
		}
	}
	kind := "none"
	if c&0x10 != 0 {
		st.Attempt, kind = r.attemptFor(acct, key, c)
	}
	if to == turnframe.JournalExecuting {
		st.Attempt, st.Lease, kind = r.ids.AttemptID(r.now), lease(l), "fresh"
	}
	e, _ := r.entry(acct, key)
	now, tl := r.now, ""
	switch {
	case c&0x0c == 0x04 && e.Status == turnframe.JournalExecuting:
		now, tl = e.LeaseUntil.Add(-time.Microsecond), "@own-end-1us"
	case c&0x0c == 0x08 && e.Status == turnframe.JournalExecuting:
		now, tl = e.LeaseUntil, "@own-end"
	}
	where := e.Status.String()
	if e.Status == turnframe.JournalExecuting && !e.LeaseUntil.After(now) {
		where += "-ended"
	}
	if e.Turn == turn && r.phase(acct, turn) == turnframe.PhaseAbandoned {
		where += "-abandoned"
		if e.Status == turnframe.JournalExecuting {
			where = map[bool]string{true: "stranded", false: "executing-abandoned-live"}[!e.LeaseUntil.After(now)]
		}
	}
	_, errs := r.apply(fmt.Sprintf("reconcile slot=%d key=%s to=%v attempt=%s from=%s actor=%q%s", s, key, to, kind, where, actor, tl),
		turnframe.Write{Account: acct, Turn: turn, Now: now, Actor: actor, Note: "reconciled", Settle: []turnframe.Settlement{st}})
	r.note(fmt.Sprintf("reconcile/%s/%s->%v %s", kind, where, to, errClass(errs[0])))
	if e.Status == turnframe.JournalNeedsIntervention && kind == "none" {
		r.note(fmt.Sprintf("intervene/%s->%v %s", mayIntervene(actor), to, errClass(errs[0])))
	}
}

// reconcilers are the actors a reconciliation is made as: the app (as a
// Write that names none), the policy, an operator, recovery.
var reconcilers = [4]turnframe.Actor{"", turnframe.ActorPolicy, "operator:alice", turnframe.ActorRecovery}

// mayIntervene names whether actor may move an entry or a row out of
// NeedsIntervention.
func mayIntervene(actor turnframe.Actor) string {
	if actor.MayIntervene() {
		return "may"
	}
	return "may-not"
}

// reconcilable returns the keys of the turn's entries a reconciliation is
// for: outcome unknown and needs intervention ones, and, on an abandoned
// turn, executing ones. (opIntervene declares attempts of open turns
// unknown.)
func (r *runner) reconcilable(acct turnframe.AccountID, turn turnframe.TurnID) []turnframe.IdempotencyKey {
	ks := r.withStatus(acct, turn, turnframe.JournalOutcomeUnknown)
	ks = append(ks, r.withStatus(acct, turn, turnframe.JournalNeedsIntervention)...)
	if r.phase(acct, turn) == turnframe.PhaseAbandoned {
		ks = append(ks, r.withStatus(acct, turn, turnframe.JournalExecuting)...)
	}
	return ks
}

func (r *runner) opPhase() {
	s, acct, turn := r.slot()
	c := r.b()
	to := turnframe.TurnPhase(c % 9)
	if to.IsTerminal() && c&0x40 == 0 { // terminal phases end a slot's turn: keep them rarer
		to = turnframe.PhaseCommitted
	}
	w := turnframe.Write{Account: acct, Turn: turn, Now: r.now}
	if c&0x20 != 0 {
		w.Advance = to
	} else {
		w.Phase = to
	}
	if c&0x80 != 0 {
		w.Replay = r.replay()
	}
	from := r.phase(acct, turn)
	vals, errs := r.apply(fmt.Sprintf("phase slot=%d from=%v to=%v advance=%v replay=%v", s, from, w.Phase, w.Advance, w.Replay != nil), w)
	if errs[0] == nil && w.Advance != turnframe.PhaseUnset {
		if got := vals[0].(turnframe.Applied).Phase; got == w.Advance {
			r.note("advance moved")
		} else {
			r.note("advance skipped")
		}
	}
}

// opBadWrite sends a Write that validation must refuse, or one that
// reads the store before it is refused.
func (r *runner) opBadWrite() {
	s, acct, turn := r.slot()
	c := r.b()
	w := turnframe.Write{Account: acct, Turn: turn, Now: r.now}
	take := turnframe.Settlement{Key: "k0", To: turnframe.JournalExecuting, Attempt: r.ids.AttemptID(r.now), Prior: r.current(acct, "k0"), Lease: time.Second}
	var what string
	switch c % 32 {
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
		w.Settle, what = []turnframe.Settlement{{Key: "k0", To: turnframe.JournalExecuting, Lease: time.Second}}, "executing without attempt"
	case 9:
		w.Phase, what = turnframe.TurnPhase(200), "no such phase"
	case 10:
		w.Begin, what = &turnframe.StoredTurn{Account: "other", ID: turn, Conversation: r.convs[s]}, "begin of another account"
	case 11:
		w.Settle, what = []turnframe.Settlement{{Key: "k0", To: turnframe.JournalCommitted, Attempt: r.current(acct, "k0")}}, "commit with outbox to empty destination"
		w.Outbox = []turnframe.OutboxMessage{{Destination: ""}}
	case 12, 13, 14, 15:
		st := specialTimes[[]int{0, 1, 5, 7}[c%4]] // epoch, min-1ns, max+1ns, year 10000
		w.Now, what = st.t, "now "+st.name
		w.Admit = []turnframe.Command{commandFor(int(c) % len(keys))}
	case 16:
		w.Phase, w.Advance, what = turnframe.PhasePlanned, turnframe.PhasePlanned, "phase and advance"
	case 17:
		w.Advance, what = turnframe.TurnPhase(99), "no such advance"
	case 18:
		w.Replay, what = &turnframe.ReplayRecord{Understanding: &turnframe.Understanding{Questions: []turnframe.UnderstoodQuestion{
			{Basis: turnframe.AnswerBasis(3 + c/32)}}}}, "replay basis out of range"
	case 19:
		w.Phase, w.Settle, what = turnframe.PhaseAbandoned, []turnframe.Settlement{take}, "abandon and take"
	case 20:
		w.Advance, w.Settle, what = turnframe.PhaseAbandoned, []turnframe.Settlement{{Key: "k0", To: turnframe.JournalPending}}, "abandon and resend"
	case 21, 22, 23:
		k := badKeys[int(c/32)%len(badKeys)]
		w.Admit, what = []turnframe.Command{{Key: k, Case: "c0", Name: "book"}}, fmt.Sprintf("admit key %q", k)
	case 24:
		k := badKeys[int(c/32)%len(badKeys)]
		w.Settle, what = []turnframe.Settlement{{Key: k, To: turnframe.JournalCommitted}}, fmt.Sprintf("settle key %q", k)
	case 25:
		st := specialTimes[[]int{0, 1, 5, 7}[c/32%4]]
		w.Settle = []turnframe.Settlement{{Key: "k0", To: turnframe.JournalCommitted, Attempt: r.current(acct, "k0")}}
		w.Outbox, what = []turnframe.OutboxMessage{{Destination: "payments", NotBefore: st.t}}, "not_before "+st.name
	case 26:
		st := specialTimes[[]int{0, 1, 5, 7}[c/32%4]]
		turn := r.ids.TurnID(r.now)
		w.Turn, w.Begin, what = turn, &turnframe.StoredTurn{Account: acct, ID: turn, Conversation: r.convs[s], ReceivedAt: st.t}, "received_at "+st.name
	case 27:
		take.Lease = [...]time.Duration{0, -time.Microsecond}[c/32%2]
		w.Settle, what = []turnframe.Settlement{take}, fmt.Sprintf("take with lease %v", take.Lease)
	case 28:
		w.Now = turnframe.MaxTime.Add(-time.Millisecond)
		w.Settle, what = []turnframe.Settlement{take}, "take whose lease ends after MaxTime"
	case 29:
		w.Settle, what = []turnframe.Settlement{{Key: "k0", To: 42}}, "no such status"
	case 30:
		w.Expect, what = map[turnframe.CaseKey]turnframe.CaseRevision{"": 1}, "expect empty case"
	case 31:
		w.Phase, w.Settle, what = turnframe.PhaseAbandoned, []turnframe.Settlement{{Key: "k0", To: turnframe.JournalPending}}, "abandon and resend by phase"
	}
	_, errs := r.apply("bad-write: "+what, w)
	r.note("bad-write " + errClass(errs[0]))
}

func (r *runner) opClaim() {
	worker := pick(r, workers)
	limit := pick(r, limits)
	c, l := r.b(), r.b()
	now, tl := r.now, ""
	switch {
	case c >= 0xc0:
		now, tl = r.timeAt(c, now)
	case c&1 != 0:
		now = now.Add(time.Duration(c) * 5 * time.Millisecond) // claim ahead: NotBefore rows become due
	}
	cs := r.claimDue(fmt.Sprintf("claim worker=%s limit=%d lease=%v%s", worker, limit, lease(l), tl), now, limit, worker, lease(l))
	if len(cs) == 0 || l>>6 > 1 {
		return
	}
	// Recovery expires ended leases a microsecond before this claim's
	// lease ends, or exactly at its end.
	at, tl := cs[0].LeaseUntil.Add(-time.Microsecond), "@end-1us"
	if l>>6 == 1 {
		at, tl = cs[0].LeaseUntil, "@end"
	}
	r.expireAt("claim/expire"+tl, "claim/expire"+tl, at)
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

func (r *runner) settlement(c, k, t byte) func(w *world) turnframe.OutboxSettlement {
	to := []turnframe.OutboxStatus{turnframe.OutboxCompleted, turnframe.OutboxPending, turnframe.OutboxFailed, turnframe.OutboxOutcomeUnknown, turnframe.OutboxDispatching}[int(k)%5]
	now, _ := r.timeAt(t, r.now)
	return func(w *world) turnframe.OutboxSettlement {
		st := turnframe.OutboxSettlement{Claim: claimAt(w, c), To: to, Now: now}
		switch to {
		case turnframe.OutboxCompleted, turnframe.OutboxOutcomeUnknown:
			st.RemoteRef, st.Code = "ref", "http.timeout"
		case turnframe.OutboxPending:
			st.Code, st.RetryAt = "retry", now.Add(time.Duration(k>>3)*7*time.Millisecond)
		case turnframe.OutboxFailed:
			st.Code = "fail"
		}
		return st
	}
}

func (r *runner) opSettleOne() {
	c, k, t := r.b(), r.b(), r.b()
	mk := r.settlement(c, k, t)
	r.do(fmt.Sprintf("settle claim=%d kind=%d", c, k%5), func(w *world) (any, error) {
		st := mk(w)
		if handled, err := storetest.SettleByHelper(r.ctx, w.store, st); handled {
			return nil, err
		}
		// A status a claim does not settle to: only Settle takes it.
		res, err := w.store.Settle(r.ctx, []turnframe.OutboxSettlement{st})
		return classes(res), err
	})
}

func classes(errs []error) []string {
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = errClass(e)
	}
	return out
}

func (r *runner) opSettleBatch() {
	n := 1 + int(r.b())%4
	mks := make([]func(*world) turnframe.OutboxSettlement, n)
	for i := range mks {
		mks[i] = r.settlement(r.b(), r.b(), r.b())
	}
	r.do(fmt.Sprintf("settle batch n=%d", n), func(w *world) (any, error) {
		sts := make([]turnframe.OutboxSettlement, n)
		for i, mk := range mks {
			sts[i] = mk(w)
		}
		res, err := w.store.Settle(r.ctx, sts)
		return classes(res), err
	})
}

// dispatchingEnds returns the lease ends of the rows the first world holds
// Dispatching, in enqueue order.
func (r *runner) dispatchingEnds() []time.Time {
	rows, _ := r.mem().ListOutbox(r.ctx, turnframe.OutboxFilter{Status: turnframe.OutboxDispatching, Limit: turnframe.MaxLimit})
	ends := make([]time.Time, len(rows))
	for i, row := range rows {
		ends[i] = row.LeaseUntil
	}
	return ends
}

// nearLease returns a microsecond before, at, or a microsecond after one of
// the last lease ends a store granted (r.now if none was).
func (r *runner) nearLease(c byte) (time.Time, string) {
	if len(r.leaseEnds) == 0 {
		return r.now, ""
	}
	return r.timeAt(0xc0|c&0x2f, r.now)
}

// opExpire expires ended leases at a time drawn around lease ends (where
// "ended at" and "ended before" part ways), at now, ahead, or in the past.
func (r *runner) opExpire() {
	c := r.b()
	var at time.Time
	var tl string
	switch c >> 6 {
	case 0:
		at, tl = r.nearLease(c)
		// Mostly around the lease end of a row Dispatching now: where an
		// expiry that ends a lease early or late differs.
		if ends := r.dispatchingEnds(); len(ends) > 0 && c&0x20 == 0 {
			end := ends[int(c>>2&7)%len(ends)]
			switch c & 3 {
			case 0:
				at, tl = end.Add(-time.Microsecond), "@end-1us"
			case 3:
				at, tl = end.Add(time.Microsecond), "@end+1us"
			default:
				at, tl = end, "@end"
			}
		}
	case 1:
		at = r.now
	case 2:
		at, tl = r.now.Add(time.Duration(c&63)*5*time.Millisecond), "@ahead"
	case 3:
		at, tl = r.timeAt(c, r.now)
		if c < 0xf0 && len(r.past) > 0 {
			at, tl = r.past[len(r.past)-1-int(c&0x3f)%len(r.past)], "@past"
		}
	}
	r.expireAt("expire claims"+tl, "expire"+tl, at)
}

// expireAt runs ExpireClaims at at on every store as the step label, the
// ids it returns compared in enqueue order (as the contract says), and
// notes note + " some" or " none" by whether it ended a lease.
func (r *runner) expireAt(label, note string, at time.Time) {
	vals, errs := r.do(label, func(w *world) (any, error) {
		ids, err := w.store.ExpireClaims(r.ctx, at)
		out := make([]string, len(ids))
		for i, id := range ids {
			out[i] = w.norm(id)
		}
		return out, err
	})
	if errs[0] == nil {
		r.note(note + " " + map[bool]string{true: "some", false: "none"}[len(vals[0].([]string)) > 0])
	}
}

// rowWith returns, mostly, the index (into every world's outbox list, which
// all hold the same rows in the same order) of a row in one of the statuses
// want as the first world holds it; -1 now and then, or when there is none.
func (r *runner) rowWith(c byte, want ...turnframe.OutboxStatus) int {
	if c&0x80 != 0 {
		return -1
	}
	var idx []int
	for i, id := range r.worlds[0].outbox {
		if rec, err := r.mem().GetOutbox(r.ctx, id); err == nil && slices.Contains(want, rec.Status) {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return -1
	}
	return idx[int(c)%len(idx)]
}

// rowAt is outboxAt, or the row at index i when i is not -1.
func rowAt(w *world, i int, c byte, unknown turnframe.OutboxID) turnframe.OutboxID {
	if i >= 0 {
		return w.outbox[i]
	}
	return outboxAt(w, c, unknown)
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
	c, v, t := r.b(), r.b(), r.b()
	unknown := r.ids.OutboxID(r.now)
	if v&0x80 != 0 {
		i := r.rowWith(c, turnframe.OutboxFailed)
		at, tl := r.timeAt(t, r.now.Add(time.Duration(v&0x1f)*time.Millisecond))
		mode := v >> 5 & 3
		r.do(fmt.Sprintf("requeue row=%d/%d fence=%s%s", c, i, fenceModes[mode], tl), func(w *world) (any, error) {
			id := rowAt(w, i, c, unknown)
			if err := w.store.Requeue(r.ctx, id, fenceFor(r, w, id, mode), at); err != nil {
				return nil, err
			}
			return w.store.GetOutbox(r.ctx, id)
		})
		return
	}
	i := r.rowWith(c, turnframe.OutboxOutcomeUnknown, turnframe.OutboxNeedsIntervention)
	verdict := turnframe.Verdict(v % 6) // 0 (unresolved) and 5 are no verdict: ErrInvalid
	actor := resolvers[v>>4&7]
	now, tl := r.timeAt(t, r.now)
	from := "any" // a row drawn at random, the zero id or one no store has
	if i >= 0 {
		if rec, err := r.mem().GetOutbox(r.ctx, r.worlds[0].outbox[i]); err == nil {
			from = rec.Status.String()
		}
	}
	ref := ""
	if t&1 != 0 {
		ref = "ref-res"
	}
	_, errs := r.do(fmt.Sprintf("resolve row=%d/%d from=%s verdict=%v actor=%q%s", c, i, from, verdict, actor, tl), func(w *world) (any, error) {
		id := rowAt(w, i, c, unknown)
		res := turnframe.Resolution{ID: id, Verdict: verdict, Code: "why", RemoteRef: ref, Actor: actor, Note: "resolved", Now: now}
		if err := w.store.Resolve(r.ctx, res); err != nil {
			return nil, err
		}
		return w.store.GetOutbox(r.ctx, id)
	})
	r.note(fmt.Sprintf("resolve/%s/%v %s", from, verdict, errClass(errs[0])))
	if from == turnframe.OutboxNeedsIntervention.String() {
		r.note(fmt.Sprintf("resolve/intervention/%s %s", mayIntervene(actor), errClass(errs[0])))
	}
}

// resolvers are the actors a resolution is made as.
var resolvers = [8]turnframe.Actor{"", turnframe.ActorApp, turnframe.ActorOperator, "app:x",
	turnframe.ActorPolicy, turnframe.ActorRecovery, "worker:w1", "operator:alice"}

func (r *runner) opPrune() {
	t := r.b()
	var cut time.Time
	tl := ""
	if t >= 0xf8 {
		cut, tl = r.timeAt(t, r.now)
	} else {
		cut = r.cutoff()
	}
	r.do("prune"+tl, func(w *world) (any, error) { return w.store.Prune(r.ctx, cut) })
}

func (r *runner) opRead() {
	_, acct, turn := r.slot()
	c := r.b()
	ctx := r.ctx
	switch c % 14 {
	case 0:
		r.do("ForTurn", func(w *world) (any, error) { return w.store.ForTurn(ctx, acct, turn) })
	case 1:
		key := r.keyOf(acct, turn)
		r.do(fmt.Sprintf("ByKey %q", key), func(w *world) (any, error) { return w.store.ByKey(ctx, acct, key) })
	case 2:
		r.do("EventsByID", func(w *world) (any, error) {
			ids := make([]turnframe.EventID, len(w.events))
			for i, id := range w.events { // asked out of order: answered in append order
				ids[len(ids)-1-i] = id
			}
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
		f := turnframe.OutboxFilter{Status: turnframe.OutboxStatus(d % 8), Limit: pick(r, limits)} // 7 is no status
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
		switch d >> 5 {
		case 1, 2, 3:
			scope.After = r.allTurns[int(d>>2)%len(r.allTurns)]
		case 4:
			scope.After = r.ids.TurnID(r.now) // after every turn so far
		case 5:
			scope.UpdatedBefore = specialTimes[int(d>>2)%len(specialTimes)].t
		}
		limit := pick(r, limits)
		vals, errs := r.do(fmt.Sprintf("ListUnfinishedTurns %+v %d", scope, limit), func(w *world) (any, error) { return w.store.ListUnfinishedTurns(ctx, scope, limit) })
		if errs[0] == nil && !scope.After.IsZero() && len(vals[0].([]turnframe.TurnPhaseMarker)) > 0 {
			r.note("listed after a cursor")
		}
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
		d := r.b()
		key := turnframe.IdempotencyKey("")
		if d < 0x80 {
			key = badKeys[int(d)%len(badKeys)]
		}
		r.do(fmt.Sprintf("ByKey-bad %q", key), func(w *world) (any, error) { return w.store.ByKey(ctx, acct, key) })
	case 12:
		r.opListAfter(acct)
	case 13:
		r.opHistory(acct, turn)
	}
}

// opExtend extends 1–3 claims (held, lost or forged) at a time and lease
// drawn, and reads their rows back.
func (r *runner) opExtend() {
	n := 1 + int(r.b())%3
	cs := make([]byte, n)
	for i := range cs {
		cs[i] = r.b()
	}
	t, l := r.b(), r.b()
	now, tl := r.timeAt(t, r.now)
	ls := lease(l)
	vals, errs := r.do(fmt.Sprintf("extend n=%d lease=%v%s", n, ls, tl), func(w *world) (any, error) {
		claims := make([]turnframe.Claim, n)
		for i, c := range cs {
			claims[i] = claimAt(w, c)
		}
		res, err := w.store.ExtendClaims(r.ctx, claims, now, ls)
		if err != nil {
			return nil, err
		}
		if len(res) != n {
			return nil, fmt.Errorf("%d results for %d claims", len(res), n)
		}
		rows := make([]string, n)
		for i, c := range claims {
			rec, err := w.store.GetOutbox(r.ctx, c.ID)
			rows[i] = errClass(err) + " " + dump(rec)
		}
		return []any{classes(res), rows}, nil
	})
	if errs[0] != nil {
		return
	}
	for _, class := range vals[0].([]any)[0].([]string) {
		if class == "ok" {
			r.note("extend held")
			r.noteLease(now.Add(ls).Truncate(time.Microsecond))
		} else {
			r.note("extend " + class)
		}
	}
}

// fenceModes name the attempts fence an operator's move carries, by mode:
// none, the attempts the row is at, one fewer (a look before its last
// claim; none for a row at one attempt) or one more (a number it never
// reached).
var fenceModes = [4]string{"none", "seen", "stale", "ahead"}

// fenceFor returns the fence of mode for row id as world w holds it: the
// row's attempts read there, shifted by the mode (0 for none, or for a row
// that cannot be read: the store's refusal of the id decides then).
func fenceFor(r *runner, w *world, id turnframe.OutboxID, mode byte) int {
	if mode == 0 {
		return 0
	}
	rec, err := w.store.GetOutbox(r.ctx, id)
	if err != nil {
		return 0
	}
	return max(0, rec.Attempts+[4]int{0, 0, -1, 1}[mode])
}

// opReleaseClaim force-releases one row: live, ended, not dispatching,
// missing, or the zero id; at a time drawn.
func (r *runner) opReleaseClaim() {
	c, t, f := r.b(), r.b(), r.b()
	mode := f & 3
	unknown := r.ids.OutboxID(r.now)
	now, tl := r.timeAt(t, r.now)
	i := r.rowWith(c|0x80&^(t&0x80), turnframe.OutboxDispatching) // half the time a Dispatching row
	state := "missing"
	if id := rowAt(r.worlds[0], i, c, unknown); id.IsZero() {
		state = "zero"
	} else if rec, err := r.mem().GetOutbox(r.ctx, id); err == nil {
		switch {
		case rec.Status != turnframe.OutboxDispatching:
			state = "not-dispatching"
		case rec.LeaseUntil.After(now):
			state = "live"
		default:
			state = "ended"
		}
	}
	_, errs := r.do(fmt.Sprintf("releaseclaim row=%d state=%s fence=%s%s", c, state, fenceModes[mode], tl), func(w *world) (any, error) {
		id := rowAt(w, i, c, unknown)
		if err := w.store.ReleaseClaim(r.ctx, id, fenceFor(r, w, id, mode), now); err != nil {
			return nil, err
		}
		return w.store.GetOutbox(r.ctx, id)
	})
	r.note(fmt.Sprintf("releaseclaim/%s %s", state, errClass(errs[0])))
}

// opReplan is a user asking again after a turn went wrong: the slot's turn
// is abandoned (or not), and a new turn of the slot plans its commands
// again, with or without one more. A command of an abandoned turn that never
// settled is adopted by the new turn; any other stands where it is.
func (r *runner) opReplan() {
	s, acct, old := r.slot()
	f, tb, l := r.b(), r.b(), r.b()
	var extra []turnframe.Command
	if f&0x10 != 0 {
		extra = r.commands()
	}
	var end time.Time // the lease end of an entry taken before the turn is abandoned
	if f&0x20 != 0 {
		for _, e := range r.entries(acct, old) {
			if e.Status != turnframe.JournalPending {
				continue
			}
			vals, errs := r.apply(fmt.Sprintf("replan/take slot=%d key=%s", s, e.Key), turnframe.Write{Account: acct, Turn: old, Now: r.now,
				Settle: []turnframe.Settlement{{Key: e.Key, To: turnframe.JournalExecuting, Attempt: r.ids.AttemptID(r.now), Prior: e.Attempt, Lease: leaseChoices[l&3]}}})
			if errs[0] == nil {
				end = vals[0].(turnframe.Applied).Settled[0].LeaseUntil
			}
			break
		}
	}
	if f&1 != 0 {
		w := turnframe.Write{Account: acct, Turn: old, Now: r.now,
			Phase: turnframe.PhaseAbandoned, Replay: &turnframe.ReplayRecord{AbandonCode: "user-left"}}
		if f&0x40 != 0 { // as Abandon writes it: right or wrong, the stores must agree
			w.ExpectPhase = turnframe.PhasePlanned
		}
		r.apply(fmt.Sprintf("replan/abandon slot=%d expect=%v", s, w.ExpectPhase), w)
	}
	var cmds []turnframe.Command
	for i, e := range r.entries(acct, old) {
		if i == 0 && f&2 != 0 {
			continue
		}
		cmds = append(cmds, e.Command)
	}
	cmds = append(cmds, extra...)
	turn := r.ids.TurnID(r.now)
	r.allTurns = append(r.allTurns, turn)
	if acct == accounts[s%len(accounts)] {
		r.slotTurns[s] = append(r.slotTurns[s], turn)
	}
	now, tl := r.timeAt(tb, r.now) // around lease ends: an Executing entry is adopted only once its lease ended
	if !end.IsZero() && tb < 0xc0 {
		d := time.Duration(int(tb%3)-1) * time.Microsecond
		now, tl = end.Add(d), fmt.Sprintf("@taken-end%+v", d)
	}
	begin := turnframe.Write{Account: acct, Turn: turn, Now: now,
		Begin: &turnframe.StoredTurn{Account: acct, ID: turn, Conversation: r.convs[s], Text: "again", ReceivedAt: now}}
	plan := turnframe.Write{Account: acct, Turn: turn, Now: now, Admit: cmds, Phase: turnframe.PhasePlanned}
	if f&4 != 0 { // begin and plan in one write
		plan.Begin, plan.Now = begin.Begin, now
	} else {
		r.apply(fmt.Sprintf("replan/begin slot=%d%s", s, tl), begin)
	}
	if f&0x80 != 0 { // as a repeat: refused for a new key or an adoption, the stores must agree
		plan.RepeatOnly = true
	}
	before := r.existing(acct, cmds)
	vals, errs := r.apply(fmt.Sprintf("replan/plan slot=%d cmds=%v repeat=%v%s", s, keysOf(cmds), plan.RepeatOnly, tl), plan)
	if errs[0] != nil {
		return
	}
	r.noteAdmitted(turn, before, vals[0].(turnframe.Applied))
	if f&8 != 0 { // the adopted entries come after those admitted before them
		r.do("replan/ForTurn", func(w *world) (any, error) { return w.store.ForTurn(r.ctx, acct, turn) })
	}
}

// opResendAbandoned runs a command of a turn to an unknown outcome (or
// leaves its attempt running), abandons the turn, and asks for a resend,
// which must be refused alike (it would never run); then reconciles it as
// settled, which an abandoned turn allows: an unknown one at once, a
// stranded attempt only once its lease ended (tried a microsecond before,
// at and after its end).
func (r *runner) opResendAbandoned() {
	s, acct, turn := r.slot()
	key := r.keyOf(acct, turn)
	f, l := r.b(), r.b()
	var end time.Time // the lease end of an attempt left running
	if e, ok := r.entry(acct, key); ok && e.Turn == turn && e.Status.IsPending() {
		att := r.ids.AttemptID(r.now)
		vals, errs := r.apply(fmt.Sprintf("resend/take slot=%d key=%s", s, key), turnframe.Write{Account: acct, Turn: turn, Now: r.now,
			Settle: []turnframe.Settlement{{Key: key, To: turnframe.JournalExecuting, Attempt: att, Prior: e.Attempt, Lease: lease(l)}}})
		switch {
		case errs[0] != nil:
		case f&4 != 0:
			end = vals[0].(turnframe.Applied).Settled[0].LeaseUntil
		default:
			r.apply(fmt.Sprintf("resend/unknown slot=%d key=%s", s, key), turnframe.Write{Account: acct, Turn: turn, Now: r.now,
				Settle: []turnframe.Settlement{{Key: key, To: turnframe.JournalOutcomeUnknown, Attempt: att, RemoteRef: "ref-u"}}})
		}
	}
	abandon := turnframe.Write{Account: acct, Turn: turn, Now: r.now}
	if f&1 != 0 {
		abandon.Phase = turnframe.PhaseAbandoned
	} else {
		abandon.Advance = turnframe.PhaseAbandoned
	}
	r.apply(fmt.Sprintf("resend/abandon slot=%d advance=%v", s, abandon.Advance), abandon)
	e, _ := r.entry(acct, key)
	_, errs := r.apply(fmt.Sprintf("resend/resend slot=%d key=%s from=%v", s, key, e.Status), turnframe.Write{Account: acct, Turn: turn, Now: r.now,
		Settle: []turnframe.Settlement{{Key: key, To: turnframe.JournalPending}}})
	if e.Status == turnframe.JournalOutcomeUnknown && e.Turn == turn {
		r.note(fmt.Sprintf("resend on %v turn %s", r.phase(acct, turn), errClass(errs[0])))
	}
	to := turnframe.JournalCommitted
	if f&2 != 0 {
		to = turnframe.JournalRejected
	}
	now, tl := r.now, ""
	if !end.IsZero() {
		d := time.Duration(int(f>>3%3)-1) * time.Microsecond
		now, tl = end.Add(d), fmt.Sprintf("@end%+v", d)
	}
	_, errs = r.apply(fmt.Sprintf("resend/reconcile slot=%d key=%s to=%v%s", s, key, to, tl), turnframe.Write{Account: acct, Turn: turn, Now: now,
		Settle: []turnframe.Settlement{{Key: key, To: to}}})
	if !end.IsZero() && e.Status == turnframe.JournalExecuting {
		r.note(fmt.Sprintf("stranded reconcile%s %s", tl, errClass(errs[0])))
	}
}

// opPages pages through the unfinished turns with the After cursor, and
// checks on each world that the pages put together are the whole listing.
func (r *runner) opPages() {
	d := r.b()
	limit := 1 + int(d%3)
	scope := turnframe.RecoveryScope{}
	if d&4 != 0 {
		scope.Account = accounts[int(d>>3)%len(accounts)]
	}
	if d&0x40 != 0 {
		scope.UpdatedBefore = r.now
	}
	vals, errs := r.do(fmt.Sprintf("pages limit=%d scope=%+v", limit, scope), func(w *world) (any, error) {
		var all []turnframe.TurnPhaseMarker
		sc := scope
		for pages := 0; ; pages++ {
			if pages > 1000 {
				r.t.Fatalf("%s: ListUnfinishedTurns pages without end", w.name)
			}
			page, err := w.store.ListUnfinishedTurns(r.ctx, sc, limit)
			if err != nil {
				return nil, err
			}
			all = append(all, page...)
			if len(page) < limit {
				break
			}
			sc.After = page[len(page)-1].Turn
		}
		full, err := w.store.ListUnfinishedTurns(r.ctx, scope, turnframe.MaxLimit)
		if err != nil {
			return nil, err
		}
		if dump(full) != dump(all) {
			r.t.Fatalf("%s: pages of %d put together differ from the listing:\npages:   %s\nlisting: %s\nops so far:\n%s",
				w.name, limit, dump(all), dump(full), strings.Join(r.log, "\n"))
		}
		return all, nil
	})
	if errs[0] == nil && len(vals[0].([]turnframe.TurnPhaseMarker)) > limit {
		r.note("pages several")
	}
}

// opExhaustRequeue claims rows, fails them as the dispatcher does when their
// budget is spent, requeues them (a fresh budget: AttemptBase), and claims
// again.
func (r *runner) opExhaustRequeue() {
	worker := pick(r, workers)
	l, n := r.b(), 1+int(r.b()%3)
	ls := lease(l)
	batch := map[*world][]turnframe.Claim{}
	vals, errs := r.do(fmt.Sprintf("cycle/claim worker=%s n=%d", worker, n), func(w *world) (any, error) {
		cs, err := w.store.ClaimDue(r.ctx, r.now, n, worker, ls)
		w.claims = append(w.claims, cs...)
		batch[w] = cs
		return cs, err
	})
	if errs[0] != nil {
		return
	}
	for i := range vals[0].([]turnframe.Claim) {
		r.do(fmt.Sprintf("cycle/fail %d", i), func(w *world) (any, error) {
			if i >= len(batch[w]) {
				return nil, fmt.Errorf("no claim %d", i)
			}
			return nil, turnframe.FailClaim(r.ctx, w.store, batch[w][i], "attempts_exhausted", r.now)
		})
		r.do(fmt.Sprintf("cycle/requeue %d", i), func(w *world) (any, error) {
			if i >= len(batch[w]) {
				return nil, fmt.Errorf("no claim %d", i)
			}
			if err := w.store.Requeue(r.ctx, batch[w][i].ID, 0, r.now); err != nil {
				return nil, err
			}
			return w.store.GetOutbox(r.ctx, batch[w][i].ID)
		})
	}
	r.claimDue(fmt.Sprintf("cycle/claim-again worker=%s n=%d", worker, n), r.now, n, worker, ls)
}

// claimDue runs ClaimDue on every store as the step label, keeps the
// claims each store handed out (claimAt picks from them), notes each
// claim's lease and a claim of a requeued row, and returns the first
// store's claims.
func (r *runner) claimDue(label string, now time.Time, limit int, worker string, lease time.Duration) []turnframe.Claim {
	vals, _ := r.do(label, func(w *world) (any, error) {
		cs, err := w.store.ClaimDue(r.ctx, now, limit, worker, lease)
		w.claims = append(w.claims, cs...)
		return cs, err
	})
	cs, _ := vals[0].([]turnframe.Claim)
	for _, cl := range cs {
		r.noteLease(cl.LeaseUntil)
		if cl.AttemptBase > 0 {
			r.note("claim after requeue")
		}
	}
	return cs
}

// opTakeOver plays two attempts on one command around a short lease: the
// first takes it; the second is refused a microsecond before the lease
// ends and takes it over at its end; the first, superseded, cannot settle;
// the second renews (or not) and settles.
func (r *runner) opTakeOver() {
	s, acct, turn := r.busySlot()
	key := r.keyOf(acct, turn)
	l, f := r.b(), r.b()
	ls := leaseChoices[l&3] + time.Duration(l>>2&7)*333*time.Nanosecond
	a1, a2 := r.ids.AttemptID(r.now), r.ids.AttemptID(r.now)
	take := func(att, prior turnframe.AttemptID, now time.Time) turnframe.Write {
		return turnframe.Write{Account: acct, Turn: turn, Now: now, Advance: turnframe.PhaseExecuting,
			Settle: []turnframe.Settlement{{Key: key, To: turnframe.JournalExecuting, Attempt: att, Prior: prior, Lease: ls}}}
	}
	vals, errs := r.apply(fmt.Sprintf("takeover/first slot=%d key=%s lease=%v", s, key, ls), take(a1, r.current(acct, key), r.now))
	if errs[0] != nil {
		return
	}
	end := vals[0].(turnframe.Applied).Settled[0].LeaseUntil
	r.apply("takeover/early", take(a2, a1, end.Add(-time.Microsecond)))
	r.apply("takeover/at-end", take(a2, a1, end))
	outcome := func(att turnframe.AttemptID, now time.Time) turnframe.Write {
		st := turnframe.Settlement{Key: key, Attempt: att}
		w := turnframe.Write{Account: acct, Turn: turn, Now: now, Advance: turnframe.PhaseCommitted, Settle: []turnframe.Settlement{st}}
		switch f % 3 {
		case 0:
			w.Settle[0].To = turnframe.JournalCommitted
			if e, ok := r.entry(acct, key); ok {
				w.Events = []turnframe.Event{{Case: e.Case, Type: "taken-over"}}
			}
			w.Outbox = []turnframe.OutboxMessage{{Destination: "payments"}, {Destination: "mail"}}[:1+int(f>>2&1)]
		case 1:
			w.Settle[0].To, w.Settle[0].Code = turnframe.JournalRejected, "no"
		case 2:
			w.Settle[0].To, w.Settle[0].RemoteRef = turnframe.JournalOutcomeUnknown, "ref-t"
		}
		return w
	}
	r.apply("takeover/superseded", outcome(a1, end.Add(time.Microsecond)))
	if f&8 != 0 {
		renew := take(a2, turnframe.AttemptID{}, end.Add(time.Microsecond))
		renew.Advance = turnframe.PhaseUnset
		r.apply("takeover/renew", renew)
	}
	r.apply("takeover/holder", outcome(a2, end.Add(2*time.Microsecond)))
}

// opBadCall gives a store method other than Apply bad input: a time out of
// range, a lease that is not one, a zero id, a key every store refuses.
// Some special times are the valid edges (MinTime, MaxTime): those calls
// must succeed alike.
func (r *runner) opBadCall() {
	c, t := r.b(), r.b()
	st := specialTimes[int(t)%len(specialTimes)]
	bad, tl := st.t, "@"+st.name
	unknown := r.ids.OutboxID(r.now)
	acct := accounts[int(t>>4)%len(accounts)]
	var name string
	var do func(w *world) (any, error)
	switch c % 18 {
	case 0:
		name, do = "ClaimDue"+tl, func(w *world) (any, error) {
			cs, err := w.store.ClaimDue(r.ctx, bad, 1, "w1", time.Nanosecond)
			w.claims = append(w.claims, cs...)
			return cs, err
		}
	case 1:
		ls := lease(0xfe + t%2) // negative or zero
		name, do = fmt.Sprintf("ClaimDue lease=%v", ls), func(w *world) (any, error) { return w.store.ClaimDue(r.ctx, r.now, 1, "w1", ls) }
	case 2:
		name, do = "ClaimDue lease past MaxTime", func(w *world) (any, error) {
			return w.store.ClaimDue(r.ctx, turnframe.MaxTime.Add(-time.Millisecond), 1, "w1", time.Hour)
		}
	case 3:
		name, do = "ExtendClaims"+tl, func(w *world) (any, error) {
			res, err := w.store.ExtendClaims(r.ctx, []turnframe.Claim{claimAt(w, t)}, bad, time.Nanosecond)
			return classes(res), err
		}
	case 4:
		name, do = "ExtendClaims forged fence", func(w *world) (any, error) {
			cl := claimAt(w, t)
			switch t % 3 {
			case 0:
				cl.ID = turnframe.OutboxID{}
			case 1:
				cl.Attempts = 0
			case 2:
				cl.Worker = ""
			}
			res, err := w.store.ExtendClaims(r.ctx, []turnframe.Claim{claimAt(w, t>>1), cl}, r.now, time.Second)
			return classes(res), err
		}
	case 5:
		name, do = "ExpireClaims"+tl, func(w *world) (any, error) {
			ids, err := w.store.ExpireClaims(r.ctx, bad)
			return len(ids), err
		}
	case 6:
		name, do = "ReleaseClaim"+tl, func(w *world) (any, error) { return nil, w.store.ReleaseClaim(r.ctx, outboxAt(w, t, unknown), 0, bad) }
	case 7:
		name, do = "ReleaseClaim zero id", func(w *world) (any, error) { return nil, w.store.ReleaseClaim(r.ctx, turnframe.OutboxID{}, 0, r.now) }
	case 8:
		name, do = "Requeue"+tl, func(w *world) (any, error) { return nil, w.store.Requeue(r.ctx, outboxAt(w, t, unknown), 0, bad) }
	case 9:
		name, do = "Prune"+tl, func(w *world) (any, error) { return w.store.Prune(r.ctx, bad) }
	case 10:
		name, do = "Resolve"+tl, func(w *world) (any, error) {
			return nil, w.store.Resolve(r.ctx, turnframe.Resolution{ID: outboxAt(w, t, unknown), Verdict: turnframe.VerdictCompleted, Now: bad})
		}
	case 11:
		m := []string{"Complete", "Retry", "Fail", "MarkUnknown"}[int(t>>3)%4]
		name, do = m+tl, func(w *world) (any, error) {
			cl := claimAt(w, t)
			switch m {
			case "Complete":
				return nil, turnframe.CompleteClaim(r.ctx, w.store, cl, "ref", bad)
			case "Retry":
				return nil, turnframe.RetryClaim(r.ctx, w.store, cl, "c", bad)
			case "Fail":
				return nil, turnframe.FailClaim(r.ctx, w.store, cl, "c", bad)
			}
			return nil, turnframe.MarkClaimUnknown(r.ctx, w.store, cl, "ref", bad)
		}
	case 12:
		name, do = "ListUnfinishedTurns"+tl, func(w *world) (any, error) {
			return w.store.ListUnfinishedTurns(r.ctx, turnframe.RecoveryScope{UpdatedBefore: bad}, 10)
		}
	case 13:
		key := badKeys[int(t)%len(badKeys)]
		name, do = fmt.Sprintf("ByKey %q", key), func(w *world) (any, error) { return w.store.ByKey(r.ctx, acct, key) }
	default:
		r.opBadCallOfIssue13(c, t, acct)
		return
	}
	_, errs := r.do("bad/"+name, do)
	want := "ok"
	if outOfRange(bad) {
		want = "Invalid"
	}
	r.note(fmt.Sprintf("bad-call %s (range %s)", errClass(errs[0]), want))
}
