package harness

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/turnframe/turnframe"
)

// policyMove is one kind of move the policy made, as the audit trail
// records it: of what (class: "row", "cmd" for a command that calls the
// remote, "local" for one that does not), from and to which status, with
// which code — or, for a move that recorded none, "note: " and its note.
type policyMove struct {
	class, from, to, code string
}

// figures are what an audit measured.
type figures struct {
	store    string // the Backend's name
	locker   bool   // the Backend could hold writes up (fault b)
	kind     string
	seed     uint64
	duration time.Duration
	drain    time.Duration // of duration: the two drain children's, from their start until both ended

	kills, lines, together, beside             int
	turns, abandoned, unfinished, notDelivered int
	// Turns that hold a NeedsIntervention entry and nothing else the
	// policy or a worker will move: left to a person (see parkedTurn). Of
	// those, not answered; their pending commands, which Recover does not
	// resume while a sibling needs intervention; and their commands left
	// Executing by an attempt that died, which Recover neither resumes nor
	// declares unknown while a sibling needs intervention.
	parkedTurns, parkedUndelivered, parkedPending, parkedDead int
	committed, rejected, unsettled                            int
	hidden, hiddenApplied                                     int
	verifiedDone, policyRejected                              int // commands committed without events by the policy (found at the remote), rejected by it (never received, turn abandoned)
	escalatedEntries, escalatedEntriesApplied                 int // commands NeedsIntervention at the end, and of those applied at the remote
	rows, completed, failed, open                             int
	escalatedRows, escalatedRowsApplied, heldRows             int // rows NeedsIntervention at the end (applied at the remote), rows held behind one in their order key
	lost, extraRows, committedTwice                           int
	// appliedTwice counts deliveries of a key after it was applied that
	// no allowed resend explains: a policy resend to a remote that
	// deduplicates (CodeResent), or Execute taking over a dead attempt of
	// a command whose remote deduplicates. Without deduplication at the
	// remote, each was a second effect; with it, each would have been.
	appliedTwice, keysAppliedTwice int
	failedButApplied               int
	overDelivered                  int
	duplicates, explained          int
	explainedAfterDeath            int // of the explained: the worker that applied the key had died before
	busyRows, busyLanded           int // rows whose known outcome met a held database; whose settlement landed all the same
	busySentAgain, busyResentDead  int // whose settlement did not land, sent again while their worker lived, after it died
	commandMismatch                int
	// From the audit trail.
	policyMoves                   map[policyMove]int
	expiredRows, deadAttempts     int // recovery's lease_ended moves to OutcomeUnknown: rows (ExpireClaims), commands (a dead or stranded attempt)
	takeOvers, localTakeOvers     int // Execute taking over a dead attempt: of a command that calls the remote, of one that does not
	actorResends                  int // resends by the concurrent actor (fault a)
	unsureLookups, lateAnswers    int // evidence
	badInterventions              int // moves out of NeedsIntervention by an actor that may not intervene
	spans, overlapLive            int // handler calls; begun while another attempt held the entry under a live lease
	overlapAfterSettle            int // begun under another attempt's lease once that attempt had settled the entry (Execute's deadline)
	overlapPastLease              int
	lateStarts, slowSends         int
	localOverlaps                 int // local commands' calls begun while another call of the command ran (allowed: one commit lands)
	localDiscarded                int // local commands left Pending on a turn abandoned while they ran (fault a): never run
	discardedButWritten           int // of those, with a move or an event recorded: must be 0
	expired, liveExpiries         int
	counts, killsAfter, errorLogs map[string]int
	integrity                     string

	// resentThenAbandoned counts commands that call the remote left Pending
	// on an abandoned turn because a resend landed before the turn was
	// abandoned: never run again, as any Pending entry of an abandoned
	// turn, and adopted by a new turn that plans them. Of those resent
	// because a lookup found the remote never received them, applied at
	// the remote: must be 0 (resentNeverReceivedApplied).
	resentThenAbandoned, resentThenAbandonedApplied int

	// The app's own rows (app.go): the commands a handler committed
	// (by account and key: the committing attempt), the app's rows, those
	// that match no such commit (or a second one), and commits without one.
	handlerCommits                        map[string]string
	appRows, appRowsExtra, appRowsMissing int
	// The platform's messages and their redeliveries (issue 15).
	msgs messageFigures
}

// policyCount counts the policy's moves for which pred holds.
func (f figures) policyCount(pred func(policyMove) bool) int {
	n := 0
	for m, k := range f.policyMoves {
		if pred(m) {
			n += k
		}
	}
	return n
}

// resolvedAutomatically counts the policy's moves of an unknown to a
// status that is not NeedsIntervention: completed or committed, resent
// (pending), failed or rejected.
func (f figures) resolvedAutomatically() int {
	return f.policyCount(func(m policyMove) bool {
		return m.from == turnframe.JournalOutcomeUnknown.String() && m.to != turnframe.JournalNeedsIntervention.String()
	})
}

func (f figures) escalatedByPolicy() int {
	return f.policyCount(func(m policyMove) bool { return m.to == turnframe.JournalNeedsIntervention.String() })
}

// resends counts the policy's resends of rows and of commands that call
// the remote, those with code only unless code is "". A command's resend
// records no code, only a note: a "not happened" is known by the asked
// kind's note (noteNotFound), a blind resend by anything else.
func (f figures) resends(code string) int {
	return f.policyCount(func(m policyMove) bool {
		if m.class == "local" || m.to != turnframe.JournalPending.String() {
			return false
		}
		c := m.code
		switch {
		case c == "note: "+noteNotFound:
			c = turnframe.CodeVerifiedNotHappened
		case strings.HasPrefix(c, "note: "):
			c = turnframe.CodeResent
		}
		return code == "" || c == code
	})
}

func (f figures) String() string {
	c := func(name string) int { return f.counts[name] }
	return fmt.Sprintf(`  kills survived:                 %d SIGKILLs (progress lines seen: %d)
  two processes recovering at once: %d times two children started together (drain included), %d times one started beside a live one
  turns:                          %d (not delivered: %d, abandoned by fault (a): %d, unfinished for recovery: %d)
                                  parked behind an escalation: %d (of which never answered: %d; commands pending behind it: %d, left executing by a dead attempt behind it: %d)
  commands:                       committed %d, rejected %d, needs intervention %d (applied at the remote: %d), unsettled %d (of which pending or executing on an abandoned turn: %d, applied at the remote: %d)
  outbox rows:                    %d (completed %d, failed with a reason %d, needs intervention %d (applied at the remote: %d), held behind one %d, still open %d)
  resolved automatically:         %d by the policy (%d committed by a lookup that found it, %d rejected: never received on an abandoned turn); %d escalated by it
                                  resends: %d blind to a deduplicating remote, %d after "not happened"; %d by the concurrent actor (fault a)
  lease ended (recovery):         %d rows expired to unknown, %d commands' dead attempts declared unknown; take-overs of a dead attempt: %d (local commands: %d)
  lookups that could not tell:    %d; late answers recorded: %d; moves out of needs_intervention by recovery, policy or a worker: %d
  effects lost:                   %d (rows missing for a committed command, or open, or completed but absent at the remote)
  rows without a committed command: %d
  commands committed twice:       %d (events per key)
  effects applied twice:          %d (deliveries of an applied key no allowed resend explains; keys the ledger applied twice: %d)
  duplicate raw deliveries:       %d (explained by a resend the policy or a take-over was allowed to make: %d; after the applier died: %d)
  failed rows applied anyway:     %d
  rows delivered more often than claimed: %d
  domain calls disagreeing with their journal entry: %d
  handler calls:                  %d; begun under another attempt's live lease: %d (and %d once it had settled the entry at its deadline); begun while another ran past its lease: %d; begun after their own lease ended: %d
  local commands:                 calls begun while another call of the command ran: %d (one commit lands); left pending on a turn abandoned while they ran: %d (with anything written: %d)
  resent, then abandoned:         %d commands put back to pending by a resend before their turn was abandoned, never run again (resent as never received, yet applied at the remote: %d)
  commands in flight elsewhere:   %d (ResultInFlight), turns deferred by a sweep: %d, attempts superseded: %d, policy writes that lost a race: %d
  kills right after a fault line: %d (drawn at once after abandon, resend_meanwhile, busy_lock, busy_settle, slow_send)
  fault (a) settlement vs phase:  abandoned while running %d (settled %d), resent meanwhile %d (settled %d); kills right after: %d, %d
  fault (b) busy settlement:      write lock held %d times (kills right after %d), settlements refused busy %d (kills right after %d); extensions %d, claims %d, expiries %d refused busy
                                  rows whose known outcome met a held database: %d, settled all the same: %d; of the others, sent again while their worker lived: %d, after it died: %d
  fault (c) slow sends:           %d slow sends (remote: %d), %d rows settled after their claim-time lease ended (kills right after %d); %d lease extensions
                                  expirer: %d calls; rows expired %d (all from dead workers: %d from a live one); claims lost: %d at extension, %d at settlement
                                  extensions that found the row just settled by the sweep's own settler: %d; settlements refused because a cut try had committed them: %d
  integrity check:                %s`,
		f.kills, f.lines, f.together, f.beside,
		f.turns, f.notDelivered, f.abandoned, f.unfinished, f.parkedTurns, f.parkedUndelivered, f.parkedPending, f.parkedDead,
		f.committed, f.rejected, f.escalatedEntries, f.escalatedEntriesApplied, f.unsettled, f.hidden, f.hiddenApplied,
		f.rows, f.completed, f.failed, f.escalatedRows, f.escalatedRowsApplied, f.heldRows, f.open,
		f.resolvedAutomatically(), f.verifiedDone, f.policyRejected, f.escalatedByPolicy(),
		f.resends(turnframe.CodeResent), f.resends(turnframe.CodeVerifiedNotHappened), f.actorResends,
		f.expiredRows, f.deadAttempts, f.takeOvers+f.localTakeOvers, f.localTakeOvers,
		f.unsureLookups, f.lateAnswers, f.badInterventions,
		f.lost, f.extraRows, f.committedTwice, f.appliedTwice, f.keysAppliedTwice,
		f.duplicates, f.explained, f.explainedAfterDeath, f.failedButApplied, f.overDelivered, f.commandMismatch,
		f.spans, f.overlapLive, f.overlapAfterSettle, f.overlapPastLease, f.lateStarts,
		f.localOverlaps, f.localDiscarded, f.discardedButWritten,
		f.resentThenAbandoned, f.resentThenAbandonedApplied,
		c("in_flight"), c("sweep_deferred"), c("superseded"), c("policy_conflict"), f.killsAfterFaults(),
		c("abandon"), c("abandon_settled"), c("resend_meanwhile"), c("resend_meanwhile_settled"),
		f.killsAfter["abandon"], f.killsAfter["resend_meanwhile"],
		c("busy_lock"), f.killsAfter["busy_lock"], c("busy_settle"), f.killsAfter["busy_settle"],
		c("busy_extend"), c("busy_claim"), c("busy_expire"),
		f.busyRows, f.busyLanded, f.busySentAgain, f.busyResentDead,
		c("slow_send"), f.slowSends, c("lease_outlived"), f.killsAfter["lease_outlived"], c("extended"),
		c("expire_calls"), f.expired, f.liveExpiries, c("claim_lost_extend"), c("claim_lost_settle"),
		c("extend_after_settle"), c("settle_landed_cut"), f.integrity) +
		fmt.Sprintf("\n  app rows in the commit:         %d for %d handler commits (without a commit: %d; commits without one: %d); app writes failed on purpose: %d",
			f.appRows, len(f.handlerCommits), f.appRowsExtra, f.appRowsMissing, c("app_error")) +
		"\n" + f.msgs.String() + f.policyLines() + f.errorLines()
}

// policyLines lists the policy's moves by kind.
func (f figures) policyLines() string {
	var b strings.Builder
	moves := slices.SortedFunc(maps.Keys(f.policyMoves), func(a, b policyMove) int {
		return strings.Compare(a.class+a.from+a.to+a.code, b.class+b.from+b.to+b.code)
	})
	for _, m := range moves {
		fmt.Fprintf(&b, "\n  policy move:                    %d× %s %s → %s (%s)", f.policyMoves[m], m.class, m.from, m.to, m.code)
	}
	return b.String()
}

// errorLines lists the messages the children logged at error level.
func (f figures) errorLines() string {
	var b strings.Builder
	for _, msg := range slices.Sorted(maps.Keys(f.errorLogs)) {
		fmt.Fprintf(&b, "\n  logged at error level:          %d× %q", f.errorLogs[msg], msg)
	}
	return b.String()
}

func (f figures) killsAfterFaults() int {
	n := 0
	for _, k := range f.killsAfter {
		n += k
	}
	return n
}

func (f figures) assert(t *testing.T) {
	t.Helper()
	is := is.New(t)
	localBlind := f.policyCount(func(m policyMove) bool { return m.class == "local" && m.code == turnframe.CodeResent })
	remoteAskedOf := f.policyCount(func(m policyMove) bool {
		return m.class != "local" && (m.code == turnframe.CodeVerifiedHappened || m.code == turnframe.CodeVerifiedNotHappened)
	})
	// A move of the policy's to OutcomeUnknown is a withhold (a call that
	// would repeat a request the remote could not recognise, not made):
	// it declares doubt and resolves nothing.
	remoteSettled := f.policyCount(func(m policyMove) bool {
		return m.class != "local" && m.to != turnframe.JournalNeedsIntervention.String() && m.to != turnframe.JournalOutcomeUnknown.String()
	})
	is.Equal(f.lost, 0)                        // no intended effect lost
	is.Equal(f.open, 0)                        // no row left pending, dispatching or unknown (but behind an escalation)
	is.Equal(f.appliedTwice, 0)                // no effect applied twice, nor one that would have been without the remote's deduplication
	is.Equal(f.keysAppliedTwice, 0)            // the ledger applied no key twice
	is.Equal(f.committedTwice, 0)              // no command committed twice
	is.Equal(f.extraRows, 0)                   // no row without its command
	is.Equal(f.failedButApplied, 0)            // a failed row never reached the remote
	is.Equal(f.overDelivered, 0)               // a row is sent only under a claim
	is.Equal(f.duplicates, f.explained)        // every duplicate delivery has a resend or a take-over allowed by the declaration behind it
	is.Equal(f.unsettled, 0)                   // every command settled, or escalated (or pending behind an escalation, or local and discarded with its abandoned turn, or resent before its turn was abandoned)
	is.Equal(f.discardedButWritten, 0)         // a local command discarded with its turn wrote nothing
	is.Equal(f.resentThenAbandonedApplied, 0)  // a command resent because a lookup found the remote never received it, then abandoned with its turn, never reached the remote
	is.Equal(f.hidden, 0)                      // no command left pending (unexplained) or executing on an abandoned turn, where recovery never looks
	is.Equal(f.unfinished, 0)                  // no turn left for recovery but those parked behind an escalation
	is.Equal(f.notDelivered, 0)                // every turn answered, abandoned by the fault, or parked behind an escalation
	is.Equal(f.commandMismatch, 0)             // the policy's settlements agree with the remote
	is.Equal(f.overlapLive, 0)                 // no command ran in two places at once under a live lease
	is.Equal(f.liveExpiries, 0)                // no row expired from a live sweep
	is.Equal(f.counts["claim_lost_extend"], 0) // no live sweep lost a claim
	is.Equal(f.counts["claim_lost_settle"], 0) // no settlement found its claim gone
	is.Equal(f.busySentAgain, 0)               // a row whose outcome was known is not sent again because its settlement met a busy database
	is.Equal(f.badInterventions, 0)            // only the application or a person moves what needs intervention
	is.Equal(f.localTakeOvers, 0)              // a dead attempt of a command declared with a Verifier is declared unknown, never run again
	is.Equal(localBlind, 0)                    // nor resent blindly
	if f.integrity != NoIntegrityCheck {
		is.Equal(f.integrity, "ok") // the database's own check (SQLite: PRAGMA integrity_check)
	}
	is.Equal(f.appRowsExtra, 0)              // no app row but that of a commit, under its attempt, once
	is.Equal(f.appRowsMissing, 0)            // and no handler commit without its app row
	is.True(f.appRows > 0)                   // the handlers wrote app rows
	is.True(f.together >= 2)                 // two processes recovered at once
	is.True(f.counts["expire_calls"] > 0)    // the expirer ran
	is.Equal(f.msgs.messagesNotOneTurn, 0)   // every message the platform delivered began exactly one turn, however often it came
	is.Equal(f.msgs.messageMismatch, 0)      // the turn of a message holds its text and conversation
	is.Equal(f.msgs.turnsUnlogged, 0)        // and every turn received with an id was a message of the platform's
	is.Equal(f.msgs.turnsWithoutID, 0)       // work receives with ids only
	is.True(f.msgs.messages > 0)             // the platform delivered messages
	is.True(f.msgs.redelivered > 0)          // redeliveries were answered with the first delivery's turn
	is.True(f.msgs.redeliveredAfterKill > 0) // some came after a kill: at a successor's start-up, or by the drain
	switch f.kind {
	case remoteDedup:
		is.True(f.resolvedAutomatically() > 0) // the policy resolved unknowns
		is.Equal(remoteAskedOf, 0)             // and asked nothing of a remote that has no Verifier
	case remoteAsked:
		is.True(f.resolvedAutomatically() > 0)                                // the policy resolved unknowns
		is.Equal(f.resends(turnframe.CodeResent), 0)                          // never a blind resend to a remote that can be asked
		is.Equal(f.resends(""), f.resends(turnframe.CodeVerifiedNotHappened)) // every resend came after a "not happened"
		is.Equal(f.takeOvers, 0)                                              // and no dead attempt ran again
	case remoteNeither:
		is.True(f.escalatedByPolicy() > 0) // unknowns escalated
		is.Equal(remoteSettled, 0)         // and nothing the remote has was settled otherwise by the policy
		is.Equal(f.takeOvers, 0)           // no dead attempt ran again
	}
}

// audit opens the database after every child is gone and checks it against the
// remote's ledger, the audit trail and what the children reported.
func audit(t *testing.T, db, kind string, rem *remote, h *harness) figures {
	t.Helper()
	ctx := context.Background()
	b := h.backend
	store, err := b.Open(ctx, db, UseAudit)
	if err != nil {
		t.Fatalf("open for audit: %v", err)
	}
	defer store.Close()
	v := rem.snapshot()
	dedup := kind == remoteDedup // declared so: the one kind whose resends and take-overs may repeat an applied key
	f := figures{kills: h.kills, lines: h.lines, together: h.together, beside: h.beside, policyMoves: map[policyMove]int{},
		handlerCommits: map[string]string{}}
	h.mu.Lock()
	f.counts, f.killsAfter, f.errorLogs = maps.Clone(h.counts), maps.Clone(h.killsAfter), maps.Clone(h.errorLogs)
	f.expired, f.liveExpiries = h.expired, len(h.liveExpiries)
	busy := slices.Clone(h.busyRows)
	for _, line := range h.errorSamples {
		t.Logf("logged at error level: %s", line)
	}
	for _, line := range h.liveExpiries {
		t.Logf("expired from a live worker: %s", line)
	}
	h.mu.Unlock()
	f.spans, f.overlapPastLease, f.lateStarts, f.slowSends = v.spans, v.overlapPastLease, v.lateStarts, v.slowSends
	f.localOverlaps = v.localOverlaps
	for _, o := range v.overlaps {
		t.Logf("handler span: %s", o)
	}

	if f.integrity, err = b.Integrity(ctx, store); err != nil {
		t.Fatalf("integrity check: %v", err)
	}
	rows, err := store.ListOutbox(ctx, turnframe.OutboxFilter{Limit: turnframe.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) == turnframe.MaxLimit {
		t.Fatalf("%d outbox rows or more: too many to audit in one listing", len(rows))
	}
	held := heldKeys(rows)
	byKey := map[string]turnframe.OutboxRecord{}
	rowHists := map[string][]turnframe.HistoryRecord{} // by remote key
	for _, r := range rows {
		byKey[string(r.Account)+"\x00"+string(r.Key)] = r
		hist := history(t, store, turnframe.OutboxSubject(r.Account, r.ID))
		rowHists[r.RemoteKey()] = hist
		f.trail("row", hist)
		f.rows++
		switch r.Status {
		case turnframe.OutboxCompleted:
			f.completed++
		case turnframe.OutboxFailed:
			f.failed++
			if r.LastCode == "" {
				f.lost++ // failed without a reason
			}
			if v.applied[r.RemoteKey()] > 0 {
				f.failedButApplied++
			}
		case turnframe.OutboxNeedsIntervention:
			f.escalatedRows++
			if v.applied[r.RemoteKey()] > 0 {
				f.escalatedRowsApplied++
			}
		case turnframe.OutboxPending:
			if r.OrderKey != "" && held[orderKeyOf(r)] {
				f.heldRows++
				break
			}
			fallthrough
		default:
			f.open++
			t.Logf("open row %v %s: %v", r.ID, r.Key, r.Status)
		}
		ds := v.deliveries[r.RemoteKey()]
		if len(ds) > r.Attempts {
			f.overDelivered++
		}
		f.auditDeliveries(t, r.RemoteKey(), ds, v, func(d delivery) (bool, string) {
			ok, why := explainRow(hist, d.attempt)
			if !ok {
				why += "; the row's history: " + describeAll(hist)
			}
			return ok, why
		})
	}
	for _, b := range busy {
		f.busyRows++
		if settlementLanded(rowHists[b.key], b.attempt) {
			f.busyLanded++ // what became of the row later is the policy's (an unknown resent to a deduplicating remote)
			continue
		}
		sender := ""
		for _, d := range v.deliveries[b.key] {
			switch {
			case d.attempt == b.attempt:
				sender = d.worker
			case d.attempt > b.attempt && sender != "" && v.diedBefore(sender, d.seq):
				f.busyResentDead++
			case d.attempt > b.attempt:
				f.busySentAgain++
				t.Logf("row %s sent again (attempt %d by %s) after attempt %d's known outcome met a busy database", b.key, d.attempt, d.worker, b.attempt)
			}
		}
	}
	for k, n := range v.applied {
		if n > 1 {
			f.keysAppliedTwice++
			t.Logf("applied %d times: %s", n, k)
		}
	}

	cmdHists := map[string][]turnframe.HistoryRecord{} // by remote key
	expected, parked := f.auditTurns(t, b, store, byKey, v, dedup, cmdHists)
	f.auditAppRows(t, b, store)
	for _, o := range v.liveOverlaps {
		if settledBefore(cmdHists[o.key], o.held, o.by) {
			f.overlapAfterSettle++
			continue
		}
		f.overlapLive++
		t.Logf("handler span: %s; history: %s", o.line, describeAll(cmdHists[o.key]))
	}
	for k := range byKey {
		if !expected[k] {
			f.extraRows++
		}
	}
	if err := b.Query(ctx, store, "SELECT COUNT(*) FROM (SELECT 1 FROM events GROUP BY account, key HAVING COUNT(*) > 1) AS twice",
		func(scan func(...any) error) error { return scan(&f.committedTwice) }); err != nil {
		t.Fatal(err)
	}
	f.msgs = auditMessages(t, b, store, h.platform, h.afterKills)
	f.msgs.firstFoundRedelivered = f.counts["first_redelivered"]
	unfinished, err := store.ListUnfinishedTurns(ctx, turnframe.RecoveryScope{}, turnframe.MaxLimit)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range unfinished {
		if !parked[m.Turn] {
			f.unfinished++
			t.Logf("turn %v left unfinished, %v", m.Turn, m.Phase)
		}
	}
	return f
}

// auditDiscarded audits a local command left Pending on an abandoned turn:
// the turn was abandoned while its handler ran (fault a), so its commit was
// refused whole and it never runs (turnframe.WithLocalCommand). Nothing of
// it may have been written: no move past Pending in its trail, no event
// under its key (its outbox rows and app row the audit counts as extra
// already).
func (f *figures) auditDiscarded(t *testing.T, store turnframe.Store, e turnframe.JournalEntry, hist []turnframe.HistoryRecord) {
	t.Helper()
	f.localDiscarded++
	for _, h := range hist {
		if !h.Evidence && h.To != turnframe.JournalPending.String() {
			f.discardedButWritten++
			t.Logf("command %s/%s, discarded on an abandoned turn, moved: %s", e.Account, e.Key, describeAll(hist))
		}
	}
	evs, err := store.EventsSince(context.Background(), e.Account, e.Case, 0, turnframe.MaxLimit)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.Key == e.Key {
			f.discardedButWritten++
			t.Logf("command %s/%s, discarded on an abandoned turn, has event %v", e.Account, e.Key, ev.ID)
		}
	}
}

// resentBefore reports whether a command's trail (hist) ends in a resend — a
// reconciliation's move from an unknown outcome, or from needs
// intervention, back to Pending — that landed before its turn's move to
// Abandoned in turnHist. Such an entry is Pending on an abandoned turn as
// one that never ran is: its turn never runs it again, recovery does not
// look at it (turnframe.Unfinished), and a new turn that plans it adopts
// it (storekit.Readmit). That is sound only if the remote never had it —
// the resend followed a lookup that found it never arrived — which the
// caller checks against the ledger (a blind resend to a deduplicating
// remote of an attempt that had acted would leave it Pending with its
// effect applied: counted, and a failure). The store refuses a resend once
// the turn is abandoned (storekit.NextEntry), under the turn's lock, so the
// store's order of the two records is the order they landed in; a resend
// recorded after the abandonment is a hole, and is not explained here.
// An attempt that took the entry from Pending and put it back before its
// first call (Executing → Pending under the attempt of that take) called
// nothing: the take and the put-back are skipped, and the entry is Pending
// for whatever put it there before them — a resend taken up and put back,
// then abandoned, is as resent then abandoned. The store refuses the
// put-back once the turn is abandoned, so the resend still precedes the
// abandonment.
func resentBefore(hist, turnHist []turnframe.HistoryRecord) bool {
	last := lastMove(hist)
	if last == nil || last.To != turnframe.JournalPending.String() || last.Attempt != "" ||
		(last.From != turnframe.JournalOutcomeUnknown.String() && last.From != turnframe.JournalNeedsIntervention.String()) {
		return false
	}
	for _, h := range turnHist {
		if !h.Evidence && h.To == turnframe.PhaseAbandoned.String() {
			return last.Seq < h.Seq
		}
	}
	return false
}

// lastMove returns the last record of hist that moved the entry, skipping
// every take an attempt put back before its first call together with its
// put-back (isPutBack): the entry is Pending then for whatever put it there
// before that take. Nil when nothing moved it.
func lastMove(hist []turnframe.HistoryRecord) *turnframe.HistoryRecord {
	var moves []*turnframe.HistoryRecord
	for i := range hist {
		h := &hist[i]
		if h.Evidence {
			continue
		}
		if n := len(moves); n > 0 && isPutBack(*moves[n-1], *h) {
			moves = moves[:n-1]
			continue
		}
		moves = append(moves, h)
	}
	if len(moves) == 0 {
		return nil
	}
	return moves[len(moves)-1]
}

// isPutBack reports whether move, following take, is an attempt's
// put-back of the entry it took from Pending by take, before its first
// call (execution.putBack).
func isPutBack(take, move turnframe.HistoryRecord) bool {
	executing, pending := turnframe.JournalExecuting.String(), turnframe.JournalPending.String()
	return take.From == pending && take.To == executing && move.From == executing && move.To == pending &&
		move.Attempt != "" && move.Attempt == take.Attempt
}

// resentNeverReceived reports whether a command's last move was a resend
// the policy made because a lookup found the remote never received it
// (CodeVerifiedNotHappened): then the remote must not have it. After a
// resend of another reason (CodeResent to a remote that deduplicates, the
// concurrent actor's), the attempt before it had an unknown outcome and
// may well have reached the remote.
func resentNeverReceived(hist []turnframe.HistoryRecord) bool {
	last := lastMove(hist) // a put-back gives no code: the resend before it says why
	return last != nil && last.To == turnframe.JournalPending.String() && last.Code == turnframe.CodeVerifiedNotHappened
}

// history reads the whole audit trail of subject, oldest first.
func history(t *testing.T, store turnframe.Store, subject turnframe.Subject) []turnframe.HistoryRecord {
	t.Helper()
	var all []turnframe.HistoryRecord
	var after int64
	for {
		page, err := store.History(context.Background(), subject, after, turnframe.MaxLimit)
		if err != nil {
			t.Fatalf("history of %v %s: %v", subject.Kind, subject.Ref, err)
		}
		all = append(all, page...)
		if len(page) < turnframe.MaxLimit {
			return all
		}
		after = page[len(page)-1].Seq
	}
}

// trail tallies one subject's audit trail.
func (f *figures) trail(class string, hist []turnframe.HistoryRecord) {
	ni := turnframe.JournalNeedsIntervention.String()
	unknown := turnframe.JournalOutcomeUnknown.String()
	executing := turnframe.JournalExecuting.String()
	for _, h := range hist {
		if h.Evidence {
			switch h.Code {
			case turnframe.CodeVerifyUnsure:
				f.unsureLookups++
			case turnframe.CodeLateAnswer:
				f.lateAnswers++
			}
			continue
		}
		if h.From == ni && !h.Actor.MayIntervene() {
			f.badInterventions++
		}
		switch {
		case h.Actor == turnframe.ActorPolicy:
			// A command sent back to pending keeps no code (the entry's
			// code is cleared, and its history record takes the entry's):
			// its note says why.
			code := h.Code
			if code == "" {
				code = "note: " + h.Note
			}
			f.policyMoves[policyMove{class: class, from: h.From, to: h.To, code: code}]++
		case h.Actor == turnframe.ActorRecovery && h.Code == turnframe.CodeLeaseEnded && h.To == unknown:
			if class == "row" {
				f.expiredRows++
			} else {
				f.deadAttempts++
			}
		case h.Actor == crashActor && h.To == turnframe.JournalPending.String():
			f.actorResends++
		}
		if class != "row" && h.From == executing && h.To == executing {
			if class == "local" {
				f.localTakeOvers++
			} else {
				f.takeOvers++
			}
		}
	}
}

// auditDeliveries checks the deliveries of one key: each that came after
// the key was applied (a duplicate) must be one that explain allows.
func (f *figures) auditDeliveries(t *testing.T, key string, ds []delivery, v ledgerView, explain func(delivery) (bool, string)) {
	applier := ""
	for _, d := range ds {
		if d.applied && applier == "" {
			applier = d.worker
		}
		if !d.dup {
			continue
		}
		f.duplicates++
		ok, why := explain(d)
		if !ok {
			f.appliedTwice++
			t.Logf("unexplained duplicate delivery of %s: attempt %d%s by %s, applied first by %s: %s", key, d.attempt, d.attemptID, d.worker, applier, why)
			continue
		}
		f.explained++
		if applier != "" && v.diedBefore(applier, d.seq) {
			f.explainedAfterDeath++
		}
	}
}

// describe names one history record for a log line.
func describe(h turnframe.HistoryRecord) string {
	return fmt.Sprintf("%s→%s by %s (%s)", h.From, h.To, h.Actor, h.Code)
}

// describeAll names every record of a history, with its attempt.
func describeAll(hist []turnframe.HistoryRecord) string {
	var parts []string
	for _, h := range hist {
		parts = append(parts, fmt.Sprintf("%s [%s]", describe(h), h.Attempt))
	}
	return strings.Join(parts, "; ")
}

// settlementLanded reports whether the claim of a row's attempt ended by
// its worker's own settlement (rather than by an expiry, or not at all).
func settlementLanded(hist []turnframe.HistoryRecord, attempt int) bool {
	att := strconv.Itoa(attempt)
	claimed := false
	for _, h := range hist {
		switch {
		case h.Evidence:
		case !claimed && h.To == turnframe.OutboxDispatching.String() && h.Attempt == att:
			claimed = true
		case claimed:
			return h.From == turnframe.OutboxDispatching.String() && strings.HasPrefix(string(h.Actor), "worker:")
		}
	}
	return false
}

// settledBefore reports whether a command's attempt held had moved the
// entry out of Executing (its own settlement, or a declaration that it
// died) before attempt by took it: then by did not take a held command,
// whatever held's handler was still doing.
func settledBefore(hist []turnframe.HistoryRecord, held, by string) bool {
	executing := turnframe.JournalExecuting.String()
	settled := false
	for _, h := range hist {
		switch {
		case h.Evidence:
		case h.From == executing && h.To != executing && h.Attempt == held:
			settled = true
		case h.To == executing && h.Attempt == by:
			return settled
		}
	}
	return false
}

// explainRow says whether the row's delivery under attempt was one the
// policy was allowed to make even if the key was applied already: its
// claim followed the policy's resend to a remote that deduplicates
// (CodeResent), and says what came before it otherwise. A claim put back
// unsent (CodeNotSent: a sweep stopped, or a destination with no place
// left, before the send) sent nothing and moves no reason: the row is
// Pending again for whatever put it there before that claim.
func explainRow(hist []turnframe.HistoryRecord, attempt int) (bool, string) {
	att := strconv.Itoa(attempt)
	var before *turnframe.HistoryRecord // the last move to pending that was not a claim put back unsent
	for i := range hist {
		h := &hist[i]
		if h.Evidence || (h.To == turnframe.OutboxPending.String() && h.Code == turnframe.CodeNotSent) {
			continue
		}
		if h.To == turnframe.OutboxDispatching.String() && h.Attempt == att {
			switch {
			case before == nil:
				return false, "claimed without a move to pending before it"
			case before.Actor == turnframe.ActorPolicy && before.Code == turnframe.CodeResent:
				return true, "a resend to a deduplicating remote"
			}
			return false, "claimed after " + describe(*before)
		}
		if h.To == turnframe.OutboxPending.String() {
			before = h
		}
	}
	return false, "no claim of attempt " + att + " in its history"
}

// explainCommand says whether a command's domain call under attempt was one
// the policy or a take-over was allowed to make even if the key was
// applied already: the attempt took the entry over from a dead attempt of
// a command whose remote deduplicates, or was superseded by such a
// take-over, or took it after the policy's resend to a remote that
// deduplicates (a command's resend records no code: against such a remote,
// every resend of the policy's is one).
func explainCommand(hist []turnframe.HistoryRecord, attempt string, dedup bool) (bool, string) {
	executing := turnframe.JournalExecuting.String()
	current := "" // the attempt holding the entry
	for _, h := range hist {
		if h.Evidence || h.To != executing {
			continue
		}
		if h.From == executing && current == attempt {
			return dedup, "superseded by a take-over by " + h.Attempt
		}
		current = h.Attempt
	}
	var before *turnframe.HistoryRecord // the last move to pending
	for i := range hist {
		h := &hist[i]
		if h.Evidence {
			continue
		}
		if h.To == executing && h.Attempt == attempt {
			switch {
			case h.From == executing:
				return dedup, "a take-over of a dead attempt"
			case before == nil:
				return false, "taken without a move to pending before it"
			case before.Actor == turnframe.ActorPolicy && dedup:
				return true, "a resend to a deduplicating remote"
			}
			return false, "taken after " + describe(*before)
		}
		// An attempt put back before its first call (from Executing)
		// called nothing and moves no reason: the entry is Pending again
		// for whatever put it there before that take.
		if h.To == turnframe.JournalPending.String() && h.From != executing {
			before = h
		}
	}
	return false, "no take of attempt " + attempt + " in its history"
}

// auditTurns checks every turn and every journal entry, and returns the
// outbox rows the committed commands must have made, and the turns parked
// behind an escalation.
func (f *figures) auditTurns(t *testing.T, b Backend, store turnframe.Store, byKey map[string]turnframe.OutboxRecord, v ledgerView, dedup bool,
	cmdHists map[string][]turnframe.HistoryRecord) (map[string]bool, map[turnframe.TurnID]bool) {
	t.Helper()
	ctx := context.Background()
	type turnRef struct {
		account turnframe.AccountID
		id      turnframe.TurnID
	}
	var refs []turnRef
	err := b.Query(ctx, store, "SELECT account, id FROM turns ORDER BY id", func(scan func(...any) error) error {
		var acct, id string
		if err := scan(&acct, &id); err != nil {
			return err
		}
		tid, err := turnframe.ParseTurnID(id)
		if err != nil {
			return err
		}
		refs = append(refs, turnRef{turnframe.AccountID(acct), tid})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	expected := map[string]bool{}
	parked := map[turnframe.TurnID]bool{}
	for _, ref := range refs {
		f.turns++
		m, err := store.TurnPhase(ctx, ref.account, ref.id)
		if err != nil {
			t.Fatal(err)
		}
		entries, err := store.ForTurn(ctx, ref.account, ref.id)
		if err != nil {
			t.Fatal(err)
		}
		isParked := parkedTurn(entries, m.Phase, time.Now())
		if isParked {
			parked[ref.id] = true
			f.parkedTurns++
		}
		switch m.Phase {
		case turnframe.PhaseDelivered:
		case turnframe.PhaseAbandoned:
			rec, err := store.Replay(ctx, ref.account, ref.id)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case rec.AbandonCode == codeFaultAbandon:
				f.abandoned++
			case isParked:
				f.parkedUndelivered++
			default:
				f.notDelivered++
			}
		default:
			if isParked {
				f.parkedUndelivered++
				break
			}
			f.notDelivered++
			t.Logf("turn %v left %v", ref.id, m.Phase)
		}
		for _, e := range entries {
			f.auditEntry(t, store, e, m.Phase, isParked, byKey, v, dedup, expected, cmdHists)
		}
	}
	return expected, parked
}

func (f *figures) auditEntry(t *testing.T, store turnframe.Store, e turnframe.JournalEntry, phase turnframe.TurnPhase, parked bool,
	byKey map[string]turnframe.OutboxRecord, v ledgerView, dedup bool, expected map[string]bool, cmdHists map[string][]turnframe.HistoryRecord) {
	t.Helper()
	ctx := context.Background()
	class := "local"
	if callsRemote(e.Name) {
		class = "cmd"
	}
	hist := history(t, store, turnframe.JournalSubject(e.Account, e.Key))
	f.trail(class, hist)
	cmdKey := commandRemoteKey(e.Account, e.Key)
	cmdHists[cmdKey] = hist
	atRemote := v.applied[cmdKey] > 0
	f.auditDeliveries(t, cmdKey, v.deliveries[cmdKey], v, func(d delivery) (bool, string) {
		ok, why := explainCommand(hist, d.attemptID, dedup)
		if !ok {
			why += "; the entry's history: " + describeAll(hist)
		}
		return ok, why
	})
	switch e.Status {
	case turnframe.JournalCommitted:
		f.committed++
		evs, err := store.EventsByID(ctx, e.Account, e.EventIDs)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) > 0 { // a handler's commit (the policy's has no events): its app row is due
			f.handlerCommits[string(e.Account)+"\x00"+string(e.Key)] = e.Attempt.String()
		}
		switch {
		case callsRemote(e.Name) && len(evs) == 0: // committed by the policy, without events: a lookup found it
			f.verifiedDone++
			if !atRemote {
				f.commandMismatch++
			}
		case len(evs) != 1 || evs[0].Key != e.Key:
			f.lost++
		case callsRemote(e.Name) && !atRemote:
			f.commandMismatch++
		}
		n := expectedRows(e.Name)
		for i := range n {
			k := string(e.Account) + "\x00" + string(turnframe.OutboxKey(e.Key, i, n))
			expected[k] = true
			r, ok := byKey[k]
			switch {
			case !ok:
				f.lost++
			case r.Status == turnframe.OutboxCompleted && v.applied[r.RemoteKey()] == 0:
				f.lost++ // completed, yet the remote never applied it
			}
		}
	case turnframe.JournalRejected:
		f.rejected++
		if e.Code == turnframe.CodeVerifiedNotHappened {
			f.policyRejected++
			if atRemote {
				f.commandMismatch++
			}
		}
	case turnframe.JournalNeedsIntervention:
		f.escalatedEntries++
		if atRemote {
			f.escalatedEntriesApplied++
		}
	case turnframe.JournalPending, turnframe.JournalExecuting:
		if e.Status == turnframe.JournalPending && phase == turnframe.PhaseAbandoned && !callsRemote(e.Name) {
			f.auditDiscarded(t, store, e, hist)
			break
		}
		if e.Status == turnframe.JournalPending && phase == turnframe.PhaseAbandoned && resentBefore(hist, history(t, store, turnframe.TurnSubject(e.Account, e.Turn))) {
			f.resentThenAbandoned++
			if atRemote && resentNeverReceived(hist) {
				f.resentThenAbandonedApplied++
				t.Logf("command %s/%s (%s), resent then abandoned with its turn, is applied at the remote: %s", e.Account, e.Key, e.Name, describeAll(hist))
			}
			break
		}
		if parked && e.Status == turnframe.JournalPending {
			f.parkedPending++
			break
		}
		if parked {
			f.parkedDead++
			t.Logf("command %s/%s (%s) left executing by dead attempt %v behind an escalation on a %v turn; applied at the remote: %t",
				e.Account, e.Key, e.Name, e.Attempt, phase, atRemote)
			break
		}
		fallthrough
	default:
		f.unsettled++
		if phase == turnframe.PhaseAbandoned {
			f.hidden++
			if callsRemote(e.Name) && atRemote {
				f.hiddenApplied++
			}
		}
		t.Logf("command %s/%s (%s) left %v under attempt %v on a %v turn; applied at the remote: %t",
			e.Account, e.Key, e.Name, e.Status, e.Attempt, phase, atRemote)
	}
}
