package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

func validationTests() []test {
	return []test{
		{"AWriteWithOneBadPartIsInvalidAndWritesNothing", testBadWrites},
		{"AWriteRefusedInTheMiddleWritesNothingOfItsFirstPart", testMidWriteFailure},
		{"ZeroNegativeAndOversizeLimitsAreInvalid", testBadLimits},
		{"BadInputToReadsAndOutboxCallsIsInvalid", testBadCallInput},
	}
}

// isInvalid checks that err is ErrInvalid, as an *InvalidError whose field
// contains field.
func isInvalid(t *testing.T, err error, field, what string) {
	t.Helper()
	if !errors.Is(err, turnframe.ErrInvalid) {
		t.Fatalf("%s: got error %v, want ErrInvalid", what, err)
	}
	var ie *turnframe.InvalidError
	if !errors.As(err, &ie) {
		t.Fatalf("%s: %v is not an *InvalidError", what, err)
	}
	if ie.Field == "" || !strings.Contains(ie.Field, field) {
		t.Fatalf("%s: the error names field %q, want one naming %q", what, ie.Field, field)
	}
}

func testBadWrites(t *testing.T, e *env) {
	is := is.New(t)
	turn, key, attempt := e.running(acme, "booking/1", at(0))
	fresh := e.freshKey()
	good := func() turnframe.Write {
		return turnframe.Write{
			Account: acme, Turn: turn, Now: at(time.Second),
			Admit:  []turnframe.Command{command(fresh, "booking/2")},
			Settle: []turnframe.Settlement{{Key: key, To: turnframe.JournalCommitted, Attempt: attempt}},
			Expect: map[turnframe.CaseKey]turnframe.CaseRevision{"booking/1": 0},
			Events: []turnframe.Event{{Case: "booking/1", Type: "booked"}},
			Outbox: []turnframe.OutboxMessage{message("")},
			Phase:  turnframe.PhaseExecuting,
			Replay: &turnframe.ReplayRecord{Response: "booked"},
		}
	}
	long := func(n int) string { return strings.Repeat("x", n) }
	const notUTF8 = "bad\xff"
	bad := []struct {
		name  string
		field string
		edit  func(w *turnframe.Write)
	}{
		{"EmptyAccount", "account", func(w *turnframe.Write) { w.Account = "" }},
		{"OversizeAccount", "account", func(w *turnframe.Write) { w.Account = turnframe.AccountID(long(turnframe.MaxAccountLen + 1)) }},
		{"NonUTF8Account", "account", func(w *turnframe.Write) { w.Account = notUTF8 }},
		{"ZeroTurnID", "turn", func(w *turnframe.Write) { w.Turn = turnframe.TurnID{} }},
		{"ZeroNow", "now", func(w *turnframe.Write) { w.Now = time.Time{} }},
		{"UnknownPhase", "phase", func(w *turnframe.Write) { w.Phase = turnframe.PhaseAbandoned + 1 }},
		{"UnknownAdvancePhase", "advance", func(w *turnframe.Write) { w.Phase, w.Advance = turnframe.PhaseUnset, turnframe.PhaseAbandoned+1 }},
		{"PhaseAndAdvanceTogether", "advance", func(w *turnframe.Write) { w.Advance = turnframe.PhaseCommitted }},
		{"UnknownExpectedPhase", "expect_phase", func(w *turnframe.Write) { w.ExpectPhase = turnframe.PhaseAbandoned + 1 }},
		{"ExpectedPhaseOfATurnItBegins", "expect_phase", func(w *turnframe.Write) {
			w.Begin = &turnframe.StoredTurn{Account: w.Account, ID: w.Turn, Conversation: e.ids.ConversationID(at(0))}
			w.ExpectPhase = turnframe.PhaseReceived
		}},
		{"ReplayWithAnOutOfRangeAnswerBasis", "replay.understanding.questions[0].basis", func(w *turnframe.Write) {
			w.Replay = &turnframe.ReplayRecord{Understanding: &turnframe.Understanding{Questions: []turnframe.UnderstoodQuestion{
				{Unit: 1, Basis: turnframe.BasisGeneralDomainKnowledge + 1},
			}}}
		}},
		{"ReplayWithABadLoadedCase", "replay.loaded_cases[0]", func(w *turnframe.Write) {
			w.Replay = &turnframe.ReplayRecord{LoadedCases: []turnframe.CaseKey{""}}
		}},
		{"EmptyKey", "admit[0].key", func(w *turnframe.Write) { w.Admit[0].Key = "" }},
		{"OversizeKey", "admit[0].key", func(w *turnframe.Write) { w.Admit[0].Key = turnframe.IdempotencyKey(long(turnframe.MaxKeyLen + 1)) }},
		{"NonUTF8Key", "admit[0].key", func(w *turnframe.Write) { w.Admit[0].Key = notUTF8 }},
		{"EmptyCase", "admit[0].case", func(w *turnframe.Write) { w.Admit[0].Case = "" }},
		{"OversizeCase", "admit[0].case", func(w *turnframe.Write) { w.Admit[0].Case = turnframe.CaseKey(long(turnframe.MaxCaseLen + 1)) }},
		{"NonUTF8Case", "admit[0].case", func(w *turnframe.Write) { w.Admit[0].Case = notUTF8 }},
		{"EmptyCommandName", "admit[0].name", func(w *turnframe.Write) { w.Admit[0].Name = "" }},
		// A NUL byte in a string a store keeps as text: PostgreSQL's text
		// cannot hold one, so no store takes it.
		{"NULInCase", "admit[0].case", func(w *turnframe.Write) { w.Admit[0].Case = "booking/\x001" }},
		{"NULInCommandName", "admit[0].name", func(w *turnframe.Write) { w.Admit[0].Name = "bo\x00ok" }},
		{"NULInNote", "note", func(w *turnframe.Write) { w.Note = "why\x00" }},
		{"NULInEventType", "events[0].type", func(w *turnframe.Write) { w.Events[0].Type = "boo\x00ked" }},
		{"TwoAdmitsWithOneKey", "admit[1].key", func(w *turnframe.Write) {
			w.Admit = append(w.Admit, command(fresh, "booking/3"))
		}},
		{"EmptySettlementKey", "settle[0].key", func(w *turnframe.Write) { w.Settle[0].Key = "" }},
		{"SettlementToNoStatus", "settle[0].to", func(w *turnframe.Write) { w.Settle[0].To = 0 }},
		{"ExecutingWithoutAnAttempt", "settle[0].attempt", func(w *turnframe.Write) {
			w.Settle[0] = turnframe.Settlement{Key: key, To: turnframe.JournalExecuting, Lease: lease}
			w.Events, w.Outbox = nil, nil
		}},
		{"ExecutingWithoutALease", "settle[0].lease", func(w *turnframe.Write) {
			w.Settle[0] = turnframe.Settlement{Key: key, To: turnframe.JournalExecuting, Attempt: attempt}
			w.Events, w.Outbox = nil, nil
		}},
		{"ExecutingWithALeaseEndingAfterMaxTime", "settle[0].lease", func(w *turnframe.Write) {
			w.Settle[0] = turnframe.Settlement{Key: key, To: turnframe.JournalExecuting, Attempt: attempt, Lease: lease}
			w.Events, w.Outbox = nil, nil
			w.Now = turnframe.MaxTime.Add(-time.Second)
		}},
		{"SettlementKeyWithANUL", "settle[0].key", func(w *turnframe.Write) { w.Settle[0].Key = "k\x001" }}, // a '~' an earlier release admitted
		{"AResendInTheWriteThatAbandonsTheTurn", "settle[0].to", func(w *turnframe.Write) {
			w.Settle, w.Events, w.Outbox, w.Expect = []turnframe.Settlement{{Key: key, To: turnframe.JournalPending}}, nil, nil, nil
			w.Phase = turnframe.PhaseAbandoned
		}},
		{"ATakeInTheWriteThatAbandonsTheTurn", "settle[0].to", func(w *turnframe.Write) {
			w.Settle, w.Events, w.Outbox, w.Expect = []turnframe.Settlement{{Key: key, To: turnframe.JournalExecuting, Attempt: attempt, Lease: time.Minute}}, nil, nil, nil
			w.Phase = turnframe.PhaseAbandoned
		}},
		{"EventWithEmptyCase", "events[0].case", func(w *turnframe.Write) { w.Events[0].Case = "" }},
		{"EventWithEmptyType", "events[0].type", func(w *turnframe.Write) { w.Events[0].Type = "" }},
		{"EventsWithoutACommitSettlement", "settle", func(w *turnframe.Write) { w.Settle, w.Outbox = nil, nil }},
		{"OutboxWithoutACommitSettlement", "settle", func(w *turnframe.Write) { w.Settle, w.Events = nil, nil }},
		{"EffectsWithTwoCommitSettlements", "settle", func(w *turnframe.Write) {
			w.Settle = append(w.Settle, turnframe.Settlement{Key: "other", To: turnframe.JournalCommitted})
		}},
		{"EmptyDestination", "outbox[0].destination", func(w *turnframe.Write) { w.Outbox[0].Destination = "" }},
		{"OversizeDestination", "outbox[0].destination", func(w *turnframe.Write) { w.Outbox[0].Destination = long(turnframe.MaxNameLen + 1) }},
		{"NonUTF8Destination", "outbox[0].destination", func(w *turnframe.Write) { w.Outbox[0].Destination = notUTF8 }},
		{"OversizeOrderKey", "outbox[0].order_key", func(w *turnframe.Write) { w.Outbox[0].OrderKey = long(turnframe.MaxNameLen + 1) }},
		{"OversizeTraceContext", "outbox[0].trace_context", func(w *turnframe.Write) {
			w.Outbox[0].TraceContext = long(turnframe.MaxTraceContextLen + 1)
		}},
		{"NULInTraceContext", "outbox[0].trace_context", func(w *turnframe.Write) { w.Outbox[0].TraceContext = traceparent + "\x00" }},
		{"NonUTF8TraceContext", "outbox[0].trace_context", func(w *turnframe.Write) { w.Outbox[0].TraceContext = notUTF8 }},
		{"ExpectWithEmptyCase", "expect", func(w *turnframe.Write) { w.Expect[""] = 0 }},
		// The ceilings of Limits, which a store keeps whoever wrote the Write.
		{"CommandPayloadOverItsCeiling", "admit[0].payload", func(w *turnframe.Write) {
			w.Admit[0].Payload = make([]byte, turnframe.MaxPayloadLen+1)
		}},
		{"MoreCommandsThanTheCeiling", "write.admit", func(w *turnframe.Write) {
			w.Admit = nil
			for i := range turnframe.MaxPlanCommands + 1 {
				w.Admit = append(w.Admit, command(turnframe.IdempotencyKey(fmt.Sprintf("%s-%d", fresh, i)), "booking/2"))
			}
		}},
		{"EventDataOverItsCeiling", "events[0].data", func(w *turnframe.Write) {
			w.Events[0].Data = make([]byte, turnframe.MaxEventDataLen+1)
		}},
		{"MoreEventsThanTheCeiling", "write.events", func(w *turnframe.Write) {
			w.Events = slices.Repeat(w.Events, turnframe.MaxOutcomeEvents+1)
		}},
		{"OutboxPayloadOverItsCeiling", "outbox[0].payload", func(w *turnframe.Write) {
			w.Outbox[0].Payload = make([]byte, turnframe.MaxPayloadLen+1)
		}},
		{"MoreOutboxMessagesThanTheCeiling", "write.outbox", func(w *turnframe.Write) {
			w.Outbox = slices.Repeat(w.Outbox, turnframe.MaxOutcomeMessages+1)
		}},
		{"MoreExpectedCasesThanTheCeiling", "write.expect", func(w *turnframe.Write) {
			for i := range turnframe.MaxExpectedCases + 1 {
				w.Expect[turnframe.CaseKey(fmt.Sprintf("case/%d", i))] = 0
			}
		}},
		{"ResponseOverItsCeiling", "replay.response", func(w *turnframe.Write) {
			w.Replay = &turnframe.ReplayRecord{Response: long(turnframe.MaxTextLen + 1)}
		}},
		{"BeginWithAMessageIDHoldingAControlCharacter", "begin.message_id", func(w *turnframe.Write) {
			w.Begin = &turnframe.StoredTurn{Account: w.Account, ID: w.Turn, Conversation: e.ids.ConversationID(at(0)), MessageID: "upd\n1"}
		}},
		{"BeginWithAnOversizeMessageID", "begin.message_id", func(w *turnframe.Write) {
			w.Begin = &turnframe.StoredTurn{Account: w.Account, ID: w.Turn, Conversation: e.ids.ConversationID(at(0)),
				MessageID: turnframe.MessageID(long(turnframe.MaxMessageIDLen + 1))}
		}},
		{"BeginOfAnotherTurn", "begin", func(w *turnframe.Write) {
			w.Begin = &turnframe.StoredTurn{Account: acme, ID: e.ids.TurnID(at(0)), Conversation: e.ids.ConversationID(at(0))}
		}},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			w := good()
			tc.edit(&w)
			e.note(w)
			before := e.snapshot()
			_, err := e.s.Apply(e.ctx, w)
			isInvalid(t, err, tc.field, tc.name)
			e.unchanged(before, tc.name)
		})
	}
	// The good write itself is accepted: each bad one failed for its bad part.
	a := e.apply(good())
	is.Equal(a.Phase, turnframe.PhaseExecuting) // the good write applies
}

func testMidWriteFailure(t *testing.T, e *env) {
	turn, key1, attempt1 := e.running(acme, "booking/1", at(0))
	key2 := e.freshKey()
	e.admit(acme, turn, at(0), command(key2, "booking/2")) // pending: it cannot commit

	// The first settlement is allowed, the second refused.
	w := commitWrite(acme, turn, key1, attempt1, at(time.Second), []turnframe.Event{{Case: "booking/1", Type: "booked"}}, []turnframe.OutboxMessage{message("")})
	w.Admit = []turnframe.Command{command(e.freshKey(), "booking/3")}
	w.Settle = append(w.Settle, turnframe.Settlement{Key: key2, To: turnframe.JournalRejected, Code: "no"})
	w.Replay = &turnframe.ReplayRecord{Response: "partly"}
	e.refused(w, turnframe.ErrConflict, "second settlement refused")

	// Everything allowed, and the phase, applied last, refused.
	w = commitWrite(acme, turn, key1, attempt1, at(time.Second), []turnframe.Event{{Case: "booking/1", Type: "booked"}}, []turnframe.OutboxMessage{message("")})
	w.Admit = []turnframe.Command{command(e.freshKey(), "booking/3")}
	w.Phase = turnframe.PhaseDelivered // key2 is still pending
	e.refused(w, turnframe.ErrConflict, "phase refused after everything else")

	// A new turn whose second command reuses a key for another command.
	b := e.beginWrite(acme, at(time.Second))
	other := command(key1, "booking/9")
	b.Admit = []turnframe.Command{command(e.freshKey(), "booking/4"), other}
	e.refused(b, turnframe.ErrConflict, "begin with a reused key")

	// A settlement of a key the turn never admitted, after a good admit.
	w = turnframe.Write{Account: acme, Turn: turn, Now: at(time.Second),
		Admit: []turnframe.Command{command(e.freshKey(), "booking/5")},
		Settle: []turnframe.Settlement{
			{Key: key1, To: turnframe.JournalExecuting, Attempt: attempt1, Lease: lease}, // the holder renews its lease
			take("never", e.ids.AttemptID(at(time.Second)), turnframe.AttemptID{}),
		}}
	e.refused(w, turnframe.ErrNotFound, "settle of an unknown key after good parts")
}

func testBadLimits(t *testing.T, e *env) {
	for _, limit := range []int{0, -1, turnframe.MaxLimit + 1} {
		_, err := e.s.ClaimDue(e.ctx, at(0), limit, worker, lease)
		isInvalid(t, err, "limit", "claim due")
		_, err = e.s.ListOutbox(e.ctx, turnframe.OutboxFilter{Limit: limit})
		isInvalid(t, err, "limit", "list outbox")
		_, err = e.s.ListUnfinishedTurns(e.ctx, turnframe.RecoveryScope{}, limit)
		isInvalid(t, err, "limit", "list unfinished turns")
		_, err = e.s.EventsSince(e.ctx, acme, "booking/1", 0, limit)
		isInvalid(t, err, "limit", "events since")
	}
}

func testBadCallInput(t *testing.T, e *env) {
	is := is.New(t)
	turn := e.begin(acme, at(0))
	e.enqueue(acme, at(0), message(""))
	c := e.claimOne(at(time.Second), worker)
	is.NoErr(turnframe.MarkClaimUnknown(e.ctx, e.s, c, "", at(time.Second))) // unknown

	checks := []struct {
		name, field string
		call        func() error
	}{
		{"LoadTurnZeroID", "turn", func() error { _, err := e.s.LoadTurn(e.ctx, acme, turnframe.TurnID{}); return err }},
		{"LoadTurnEmptyAccount", "account", func() error { _, err := e.s.LoadTurn(e.ctx, "", turn); return err }},
		{"TurnPhaseZeroID", "turn", func() error { _, err := e.s.TurnPhase(e.ctx, acme, turnframe.TurnID{}); return err }},
		{"ByKeyEmptyKey", "key", func() error { _, err := e.s.ByKey(e.ctx, acme, ""); return err }},
		{"CaseRevisionEmptyCase", "case", func() error { _, err := e.s.CaseRevision(e.ctx, acme, ""); return err }},
		{"ClaimEmptyWorker", "worker", func() error { _, err := e.s.ClaimDue(e.ctx, at(time.Hour), 10, "", lease); return err }},
		{"ListOutboxBadAccount", "account", func() error {
			_, err := e.s.ListOutbox(e.ctx, turnframe.OutboxFilter{Account: "bad\xff", Limit: 10})
			return err
		}},
		{"ListUnfinishedBadAccount", "account", func() error {
			_, err := e.s.ListUnfinishedTurns(e.ctx, turnframe.RecoveryScope{Account: "bad\xff"}, 10)
			return err
		}},
		{"ResolveUnresolved", "verdict", func() error {
			return e.s.Resolve(e.ctx, turnframe.Resolution{ID: c.ID, Verdict: turnframe.VerdictUnresolved, Now: at(time.Hour)})
		}},
		{"GetOutboxZeroID", "id", func() error { _, err := e.s.GetOutbox(e.ctx, turnframe.OutboxID{}); return err }},
		{"CompleteZeroClaim", "claim", func() error { return turnframe.CompleteClaim(e.ctx, e.s, turnframe.Claim{}, "", at(time.Hour)) }},
		{"RetryWithoutATime", "retry_at", func() error {
			c2 := c
			return turnframe.RetryClaim(e.ctx, e.s, c2, "busy", time.Time{})
		}},
	}
	for _, tc := range checks {
		t.Run(tc.name, func(t *testing.T) {
			before := e.snapshot()
			isInvalid(t, tc.call(), tc.field, tc.name)
			e.unchanged(before, tc.name)
		})
	}
}
