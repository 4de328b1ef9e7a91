package difftest

import (
	"fmt"
	"strings"

	"github.com/turnframe/turnframe"
)

// This file holds the operations of issue 13: the audit trail (History,
// RecordEvidence), listing the outbox after a cursor, and the bad input of
// both. Each store numbers its own history records (Seq is increasing per
// store, and what a Write appends in which order is each store's), so
// records are compared without their Seq, and a cursor is a position in
// each world's own history.

// historyOf reads subject's whole history from w, fails the run unless its
// Seq rises, and returns it with Seq cleared, and the Seqs.
func (r *runner) historyOf(w *world, subject turnframe.Subject) ([]turnframe.HistoryRecord, []int64, error) {
	r.t.Helper()
	recs, err := w.store.History(r.ctx, subject, 0, turnframe.MaxLimit)
	if err != nil {
		return nil, nil, err
	}
	seqs := make([]int64, len(recs))
	for i := range recs {
		seqs[i] = recs[i].Seq
		if i > 0 && seqs[i] <= seqs[i-1] || seqs[i] <= 0 {
			r.t.Fatalf("%s: history of %v %s: Seq %v does not rise\nops so far:\n%s", w.name, subject.Kind, subject.Ref, seqs, strings.Join(r.log, "\n"))
		}
		recs[i].Seq = 0
	}
	return recs, seqs, nil
}

// subjectAt picks a subject by c: the turn, a key of it, a row (of the
// world's list, or none the store has), or now and then one that is
// ErrInvalid. acct may be the other tenant's.
func (r *runner) subjectAt(c byte, acct turnframe.AccountID, turn turnframe.TurnID) (string, func(w *world) turnframe.Subject) {
	unknown := r.ids.OutboxID(r.now)
	switch c % 8 {
	case 0, 1:
		return "turn", func(*world) turnframe.Subject { return turnframe.TurnSubject(acct, turn) }
	case 2, 3, 4:
		key := r.keyOf(acct, turn)
		return "key " + string(key), func(*world) turnframe.Subject { return turnframe.JournalSubject(acct, key) }
	case 5, 6:
		d := r.b()
		// The row's own account, mostly: the first world's says.
		owner := acct
		if id := outboxAt(r.worlds[0], d, unknown); !id.IsZero() && d&0x40 == 0 {
			if rec, err := r.mem().GetOutbox(r.ctx, id); err == nil {
				owner = rec.Account
			}
		}
		return fmt.Sprintf("row %d of %s", d, owner), func(w *world) turnframe.Subject {
			return turnframe.OutboxSubject(owner, outboxAt(w, d, unknown))
		}
	}
	bad := []turnframe.Subject{
		{Kind: 0, Account: acct, Ref: "x"},
		{Kind: turnframe.SubjectTurn + 1, Account: acct, Ref: "x"},
		{Kind: turnframe.SubjectJournal, Account: "", Ref: "k0"},
		{Kind: turnframe.SubjectJournal, Account: acct, Ref: ""},
		{Kind: turnframe.SubjectOutbox, Account: acct, Ref: "not an id"},
		{Kind: turnframe.SubjectTurn, Account: acct, Ref: "bad\xff"},
	}[int(c>>3)%6]
	return fmt.Sprintf("odd %+q", bad), func(*world) turnframe.Subject { return bad }
}

// opHistory reads a page of a subject's history: from the first record,
// after one of its own records (by position in the world's own history),
// or after a Seq no record has.
func (r *runner) opHistory(acct turnframe.AccountID, turn turnframe.TurnID) {
	c, d := r.b(), r.b()
	what, subject := r.subjectAt(c, acct, turn)
	limit := pick(r, limits)
	vals, errs := r.do(fmt.Sprintf("history %s cursor=%d limit=%d", what, d%8, limit), func(w *world) (any, error) {
		sub := subject(w)
		full, seqs, err := r.historyOf(w, sub)
		if err != nil {
			return nil, err
		}
		after := int64(0)
		switch {
		case d%8 == 6:
			after = -1
		case d%8 == 7:
			after = 1 << 62
		case d%8 >= 2 && len(seqs) > 0:
			after = seqs[int(d>>3)%len(seqs)]
		}
		page, err := w.store.History(r.ctx, sub, after, limit)
		for i := range page {
			page[i].Seq = 0
		}
		return []any{full, page}, err
	})
	if errs[0] == nil {
		n := len(vals[0].([]any)[1].([]turnframe.HistoryRecord))
		r.note("history " + map[bool]string{true: "some", false: "none"}[n > 0])
	} else {
		r.note("history " + errClass(errs[0]))
	}
}

// opEvidence records evidence about a subject, as an actor, at a time
// drawn, and reads back what was recorded.
func (r *runner) opEvidence() {
	_, acct, turn := r.slot()
	c, a, t := r.b(), r.b(), r.b()
	what, subject := r.subjectAt(c, acct, turn)
	actor := []turnframe.Actor{turnframe.ActorPolicy, turnframe.ActorOperator, "app:x", "", "bad\nactor"}[int(a)%5]
	at, tl := r.timeAt(t, r.now)
	note := []string{"", "the remote answered 202", strings.Repeat("n", turnframe.MaxNoteLen+1)}[int(a>>3)%3]
	_, errs := r.do(fmt.Sprintf("evidence %s actor=%q note=%d%s", what, actor, len(note), tl), func(w *world) (any, error) {
		sub := subject(w)
		rec := turnframe.NewEvidence(sub, "", actor, "lookup.unsure", "req-1", "", at)
		rec.Note = note // NewEvidence clips it; a record given directly is checked
		if a&0x80 != 0 {
			rec.From, rec.To, rec.Evidence = "completed", "bogus", false // the store's to set
		}
		if err := w.store.RecordEvidence(r.ctx, rec); err != nil {
			return nil, err
		}
		full, _, err := r.historyOf(w, sub)
		return full, err
	})
	r.note("evidence " + errClass(errs[0]))
}

// opListAfter lists the outbox after a cursor: a row of the world's list
// (kept or pruned), one no store has, or none; filtered or not.
func (r *runner) opListAfter(acct turnframe.AccountID) {
	d, e := r.b(), r.b()
	unknown := r.ids.OutboxID(r.now)
	f := turnframe.OutboxFilter{Limit: pick(r, limits)}
	if e&1 != 0 {
		f.Account = acct
	}
	if e&2 != 0 {
		f.Status = turnframe.OutboxStatus(e>>2) % 7
	}
	vals, errs := r.do(fmt.Sprintf("ListOutbox after=%d filter=%+v", d, f), func(w *world) (any, error) {
		g := f
		g.After = outboxAt(w, d, unknown)
		return w.store.ListOutbox(r.ctx, g)
	})
	if errs[0] == nil {
		r.note("list after " + map[bool]string{true: "some", false: "none"}[len(vals[0].([]turnframe.OutboxRecord)) > 0])
	} else {
		r.note("list after " + errClass(errs[0]))
	}
}

// opPages13 pages through the outbox with the After cursor and checks, on
// each world, that the pages put together are the whole listing.
func (r *runner) opPages13() {
	d := r.b()
	limit := 1 + int(d%3)
	f := turnframe.OutboxFilter{Limit: limit}
	if d&4 != 0 {
		f.Account = accounts[int(d>>3)%len(accounts)]
	}
	if d&0x40 != 0 {
		f.Status = turnframe.OutboxStatus(1 + int(d>>4)%6)
	}
	vals, errs := r.do(fmt.Sprintf("outbox pages %+v", f), func(w *world) (any, error) {
		var all []turnframe.OutboxRecord
		g := f
		for pages := 0; ; pages++ {
			if pages > 1000 {
				r.t.Fatalf("%s: ListOutbox pages without end", w.name)
			}
			page, err := w.store.ListOutbox(r.ctx, g)
			if err != nil {
				return nil, err
			}
			all = append(all, page...)
			if len(page) < limit {
				break
			}
			g.After = page[len(page)-1].ID
		}
		g = f
		g.Limit = turnframe.MaxLimit
		full, err := w.store.ListOutbox(r.ctx, g)
		if err != nil {
			return nil, err
		}
		if dump(full) != dump(all) {
			r.t.Fatalf("%s: outbox pages of %d put together differ from the listing:\npages:   %s\nlisting: %s\nops so far:\n%s",
				w.name, limit, dump(all), dump(full), strings.Join(r.log, "\n"))
		}
		return all, nil
	})
	if errs[0] == nil && len(vals[0].([]turnframe.OutboxRecord)) > limit {
		r.note("outbox pages several")
	}
}

// opBadCallOfIssue13 gives the calls of issue 13 bad input: a write's actor
// and note, a resolution's actor, history limits and subjects, evidence
// without an actor or at a time out of range.
func (r *runner) opBadCallOfIssue13(c, t byte, acct turnframe.AccountID) {
	turn := r.slotTurns[int(t)%turnSlots][0]
	var name string
	var do func(w *world) (any, error)
	switch c % 18 {
	case 14:
		actor := []turnframe.Actor{"op\n", turnframe.Actor(strings.Repeat("a", turnframe.MaxNameLen+1)), "bad\xff"}[int(t)%3]
		name, do = fmt.Sprintf("Apply actor %q", actor), func(w *world) (any, error) {
			return w.store.Apply(r.ctx, turnframe.Write{Account: acct, Turn: turn, Now: r.now, Actor: actor, Phase: turnframe.PhaseInterpreted})
		}
	case 15:
		name, do = "Apply note oversize", func(w *world) (any, error) {
			return w.store.Apply(r.ctx, turnframe.Write{Account: acct, Turn: turn, Now: r.now, Note: strings.Repeat("n", turnframe.MaxNoteLen+1)})
		}
	case 16:
		limit := []int{0, -1, turnframe.MaxLimit + 1}[int(t)%3]
		name, do = fmt.Sprintf("History limit %d", limit), func(w *world) (any, error) {
			return w.store.History(r.ctx, turnframe.TurnSubject(acct, turn), 0, limit)
		}
	case 17:
		st := specialTimes[int(t>>2)%len(specialTimes)]
		unknown := r.ids.OutboxID(r.now)
		name, do = "Resolve actor and evidence @"+st.name, func(w *world) (any, error) {
			err := w.store.Resolve(r.ctx, turnframe.Resolution{ID: outboxAt(w, t, unknown), Verdict: turnframe.VerdictFailed, Actor: "x\ty\n", Now: r.now})
			eerr := w.store.RecordEvidence(r.ctx, turnframe.NewEvidence(turnframe.TurnSubject(acct, turn), "", turnframe.ActorPolicy, "", "", "", st.t))
			return errClass(eerr), err
		}
	}
	_, errs := r.do("bad13/"+name, do)
	r.note("bad13 " + errClass(errs[0]))
}

// compareHistories compares, at the end, the history of every turn, key
// and row, read through either account, on every world.
func (r *runner) compareHistories() {
	r.t.Helper()
	var subjects []func(w *world) turnframe.Subject
	for _, acct := range accounts {
		for _, turn := range r.allTurns {
			subjects = append(subjects, func(*world) turnframe.Subject { return turnframe.TurnSubject(acct, turn) })
		}
		for _, key := range keys {
			subjects = append(subjects, func(*world) turnframe.Subject { return turnframe.JournalSubject(acct, key) })
		}
		for i := range r.worlds[0].outbox {
			subjects = append(subjects, func(w *world) turnframe.Subject { return turnframe.OutboxSubject(acct, w.outbox[i]) })
		}
	}
	for i, subject := range subjects {
		r.do(fmt.Sprintf("final history %d", i), func(w *world) (any, error) {
			sub := subject(w)
			recs, _, err := r.historyOf(w, sub)
			if err == nil {
				r.checkChain(w, sub, recs)
			}
			return recs, err
		})
	}
}

// checkChain fails the run unless the history of a subject that exists
// begins with its creation, chains each move from where the last left it,
// and ends where the subject is: a move without its record, or a record
// without its move, breaks the chain in whichever store made it.
func (r *runner) checkChain(w *world, subject turnframe.Subject, recs []turnframe.HistoryRecord) {
	r.t.Helper()
	var now string
	switch subject.Kind {
	case turnframe.SubjectTurn:
		id, _ := turnframe.ParseTurnID(subject.Ref)
		m, err := w.store.TurnPhase(r.ctx, subject.Account, id)
		if err != nil {
			return
		}
		now = m.Phase.String()
	case turnframe.SubjectJournal:
		e, err := w.store.ByKey(r.ctx, subject.Account, turnframe.IdempotencyKey(subject.Ref))
		if err != nil {
			return
		}
		now = e.Status.String()
	case turnframe.SubjectOutbox:
		id, _ := turnframe.ParseOutboxID(subject.Ref)
		row, err := w.store.GetOutbox(r.ctx, id)
		if err != nil || row.Account != subject.Account {
			return
		}
		now = row.Status.String()
	}
	at := ""
	for i, rec := range recs {
		if rec.From != at {
			r.t.Fatalf("%s: %v %s: record %d moves from %q, but its trail left it at %q: %s\nops so far:\n%s",
				w.name, subject.Kind, subject.Ref, i, rec.From, at, dump(recs), strings.Join(r.log, "\n"))
		}
		at = rec.To
	}
	if at != now {
		r.t.Fatalf("%s: %v %s is %s, but its trail ends at %q: %s\nops so far:\n%s",
			w.name, subject.Kind, subject.Ref, now, at, dump(recs), strings.Join(r.log, "\n"))
	}
}
