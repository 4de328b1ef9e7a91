package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// The rules of time at the boundary (issue 11 item 7, issue 12 item 14):
// every time a store takes lies between turnframe.MinTime and
// turnframe.MaxTime, and every time it accepts reads back as itself.

func timeTests() []test {
	return []test{
		{"EveryTimeBeforeMinTimeOrAfterMaxTimeIsInvalidAndWritesNothing", testTimesOutOfRange},
		{"TimesAtExactlyMinTimeAndMaxTimeAreAcceptedAndReadBackAsThemselves", testTimesAtTheBounds},
		{"AcceptedTimesReadBackInUTCTruncatedToTheMicrosecond", testTimesTruncated},
	}
}

// badTimes are times outside MinTime … MaxTime.
var badTimes = []struct {
	name string
	t    time.Time
}{
	{"1969", time.Date(1969, time.December, 31, 23, 59, 59, 0, time.UTC)},
	{"TheUnixEpoch", time.Unix(0, 0).UTC()},
	{"ANanosecondBeforeMinTime", turnframe.MinTime.Add(-time.Nanosecond)}, // would be stored as the epoch: "no time"
	{"Year10000", time.Date(10000, time.January, 1, 0, 0, 0, 0, time.UTC)},
	{"ANanosecondAfterMaxTime", turnframe.MaxTime.Add(time.Nanosecond)},
	{"TheUnixEpochInAnotherZone", time.Unix(0, 0).In(time.FixedZone("UTC+2", 2*60*60))},
}

func testTimesOutOfRange(t *testing.T, e *env) {
	turn, key, attempt := e.running(acme, "booking/1", at(0))
	rows := e.enqueue(acme, at(0), message(""), message(""), message(""))
	cs := e.claim(at(time.Second), 10, worker)
	if len(cs) != 3 {
		t.Fatalf("claimed %d rows, want 3", len(cs))
	}
	if err := turnframe.FailClaim(e.ctx, e.s, cs[1], "declined", at(time.Second)); err != nil {
		t.Fatalf("fail: %v", err)
	}
	if err := turnframe.MarkClaimUnknown(e.ctx, e.s, cs[2], "", at(time.Second)); err != nil {
		t.Fatalf("mark unknown: %v", err)
	}
	c, failed, unknown := cs[0], rows[1].ID, rows[2].ID

	// Each call returns the operation to try: an Apply is noted first, so
	// the snapshot taken before it reads everything it names.
	apply := func(w turnframe.Write) func() error {
		e.note(w)
		return func() error { _, err := e.s.Apply(e.ctx, w); return err }
	}
	calls := []struct {
		name string
		call func(bad time.Time) func() error
	}{
		{"ApplyNow", func(bad time.Time) func() error {
			return apply(turnframe.Write{Account: acme, Turn: turn, Now: bad, Admit: []turnframe.Command{command(e.freshKey(), "booking/2")}})
		}},
		{"ApplyNowOfABegin", func(bad time.Time) func() error {
			w := e.beginWrite(acme, at(0))
			w.Now = bad
			return apply(w)
		}},
		{"BeginReceivedAt", func(bad time.Time) func() error {
			w := e.beginWrite(acme, at(0))
			w.Begin.ReceivedAt = bad
			return apply(w)
		}},
		{"OutboxNotBefore", func(bad time.Time) func() error {
			m := message("")
			m.NotBefore = bad
			return apply(commitWrite(acme, turn, key, attempt, at(time.Second), nil, []turnframe.OutboxMessage{m}))
		}},
		{"ClaimDue", func(bad time.Time) func() error {
			return func() error { _, err := e.s.ClaimDue(e.ctx, bad, 10, worker, lease); return err }
		}},
		{"ExtendClaims", func(bad time.Time) func() error {
			return func() error { _, err := e.s.ExtendClaims(e.ctx, []turnframe.Claim{c}, bad, lease); return err }
		}},
		{"SettleNow", func(bad time.Time) func() error {
			return func() error {
				return settleOneBatch(e, turnframe.OutboxSettlement{Claim: c, To: turnframe.OutboxCompleted, Now: bad})
			}
		}},
		{"SettleRetryAt", func(bad time.Time) func() error {
			return func() error {
				return settleOneBatch(e, turnframe.OutboxSettlement{Claim: c, To: turnframe.OutboxPending, RetryAt: bad, Now: at(time.Second)})
			}
		}},
		{"Complete", func(bad time.Time) func() error {
			return func() error { return turnframe.CompleteClaim(e.ctx, e.s, c, "", bad) }
		}},
		{"Retry", func(bad time.Time) func() error {
			return func() error { return turnframe.RetryClaim(e.ctx, e.s, c, "busy", bad) }
		}},
		{"Fail", func(bad time.Time) func() error {
			return func() error { return turnframe.FailClaim(e.ctx, e.s, c, "declined", bad) }
		}},
		{"MarkUnknown", func(bad time.Time) func() error {
			return func() error { return turnframe.MarkClaimUnknown(e.ctx, e.s, c, "", bad) }
		}},
		{"Resolve", func(bad time.Time) func() error {
			return func() error {
				return e.s.Resolve(e.ctx, turnframe.Resolution{ID: unknown, Verdict: turnframe.VerdictResend, Now: bad})
			}
		}},
		{"Requeue", func(bad time.Time) func() error { return func() error { return e.s.Requeue(e.ctx, failed, 0, bad) } }},
		{"ExpireClaims", func(bad time.Time) func() error {
			return func() error { _, err := e.s.ExpireClaims(e.ctx, bad); return err }
		}},
		{"RecordEvidenceAt", func(bad time.Time) func() error {
			return func() error {
				return e.s.RecordEvidence(e.ctx, turnframe.NewEvidence(turnframe.OutboxSubject(acme, unknown), "", turnframe.ActorPolicy, "", "", "", bad))
			}
		}},
		{"ReleaseClaim", func(bad time.Time) func() error { return func() error { return e.s.ReleaseClaim(e.ctx, c.ID, 0, bad) } }},
		{"Prune", func(bad time.Time) func() error {
			return func() error { _, err := e.s.Prune(e.ctx, bad); return err }
		}},
		{"ListUnfinishedTurnsUpdatedBefore", func(bad time.Time) func() error {
			return func() error {
				_, err := e.s.ListUnfinishedTurns(e.ctx, turnframe.RecoveryScope{UpdatedBefore: bad}, 10)
				return err
			}
		}},
	}
	// Every operation is made (and noted) first, so one snapshot taken
	// before any of them runs is what the store must still read after each.
	type op struct {
		name string
		do   func() error
	}
	var ops []op
	for _, call := range calls {
		for _, bad := range badTimes {
			ops = append(ops, op{call.name + "_" + bad.name, call.call(bad.t)})
		}
	}
	before := e.snapshot()
	for _, op := range ops {
		t.Run(op.name, func(t *testing.T) {
			if err := op.do(); !errors.Is(err, turnframe.ErrInvalid) {
				t.Fatalf("%s: got error %v, want ErrInvalid", op.name, err)
			}
			e.unchanged(before, op.name)
		})
	}
}

func testTimesAtTheBounds(t *testing.T, e *env) {
	is := is.New(t)
	lo, hi := turnframe.MinTime, turnframe.MaxTime
	// A lease taken at hi-lease ends at hi exactly: the latest a claim may be made.
	late := hi.Add(-lease)
	same := func(got, want time.Time, what string) {
		t.Helper()
		if !got.Equal(want) {
			t.Fatalf("%s: read back %v, want %v", what, got.Format(time.RFC3339Nano), want.Format(time.RFC3339Nano))
		}
	}

	// A turn begun, a command admitted and taken, at MinTime.
	w := e.beginWrite(acme, lo)
	key := e.freshKey()
	attempt := e.ids.AttemptID(lo)
	w.Admit = []turnframe.Command{command(key, "booking/1")}
	w.Settle = []turnframe.Settlement{take(key, attempt, turnframe.AttemptID{})}
	e.apply(w)
	turn, err := e.s.LoadTurn(e.ctx, acme, w.Turn)
	is.NoErr(err) // load turn
	same(turn.ReceivedAt, lo, "received at")
	same(turn.UpdatedAt, lo, "turn updated at")
	entry := e.entry(acme, key)
	same(entry.AdmittedAt, lo, "admitted at")
	same(entry.LeaseUntil, lo.Add(lease), "entry lease")

	// Committed at MinTime with rows due at MinTime and at MaxTime.
	late1 := message("")
	late1.NotBefore = hi
	a := e.commit(acme, w.Turn, key, attempt, lo, []turnframe.Event{{Case: "booking/1", Type: "booked"}},
		[]turnframe.OutboxMessage{late1, message(""), message(""), message(""), message(""), message("")})
	same(a.Events[0].At, lo, "event at")
	evs, err := e.s.EventsByID(e.ctx, acme, []turnframe.EventID{a.Events[0].ID})
	is.NoErr(err) // events by id
	same(evs[0].At, lo, "stored event at")
	ids := entryIDs(a.Outbox)
	same(e.row(ids[0]).DueAt, hi, "due at MaxTime")
	same(e.row(ids[1]).DueAt, lo, "due at MinTime")
	same(e.row(ids[1]).CreatedAt, lo, "created at")

	// Claimed at MinTime; leases moved to end at MaxTime.
	cs := e.claim(lo, 10, worker)
	is.Equal(claimedIDs(cs), ids[1:]) // every row due at MinTime
	same(e.row(ids[1]).ClaimedAt, lo, "claimed at")
	results, err := e.s.ExtendClaims(e.ctx, cs[:1], late, lease)
	is.NoErr(err)        // extend at MaxTime - lease
	is.NoErr(results[0]) // extended
	same(e.row(ids[1]).LeaseUntil, hi, "lease until MaxTime")
	late2, err := e.s.ClaimDue(e.ctx, late, 10, "worker-2", lease)
	is.NoErr(err)           // a claim at MaxTime - lease
	is.Equal(len(late2), 0) // nothing due: every row is claimed or due at MaxTime

	// Settled at MaxTime and at MinTime.
	is.NoErr(turnframe.CompleteClaim(e.ctx, e.s, cs[0], "", hi)) // completed at MaxTime
	same(e.row(ids[1]).FinishedAt, hi, "finished at MaxTime")
	same(e.row(ids[1]).UpdatedAt, hi, "updated at MaxTime")
	is.NoErr(turnframe.RetryClaim(e.ctx, e.s, cs[1], "busy", hi)) // retried, due at MaxTime
	same(e.row(ids[2]).DueAt, hi, "retry due at MaxTime")
	is.NoErr(turnframe.FailClaim(e.ctx, e.s, cs[2], "declined", lo)) // failed at MinTime
	same(e.row(ids[3]).FinishedAt, lo, "finished at MinTime")
	is.NoErr(e.s.Requeue(e.ctx, ids[3], 0, hi)) // requeued at MaxTime
	same(e.row(ids[3]).DueAt, hi, "requeued due at MaxTime")
	is.NoErr(turnframe.MarkClaimUnknown(e.ctx, e.s, cs[3], "", lo))                                           // unknown at MinTime
	is.NoErr(e.s.Resolve(e.ctx, turnframe.Resolution{ID: ids[4], Verdict: turnframe.VerdictResend, Now: hi})) // resolved at MaxTime
	same(e.row(ids[4]).DueAt, hi, "resend due at MaxTime")
	is.NoErr(e.s.ReleaseClaim(e.ctx, ids[5], 0, lo)) // force-released at MinTime
	same(e.row(ids[5]).UpdatedAt, lo, "released at MinTime")
	same(e.row(ids[5]).DueAt, lo, "due time kept")

	expired, err := e.s.ExpireClaims(e.ctx, hi)
	is.NoErr(err)             // expire at MaxTime
	is.Equal(len(expired), 0) // nothing is dispatching any more
	_, err = e.s.Prune(e.ctx, lo)
	is.NoErr(err) // prune at MinTime
	n, err := e.s.Prune(e.ctx, hi)
	is.NoErr(err)  // prune at MaxTime
	is.Equal(n, 0) // the row finished at MaxTime is not finished before it
	for _, cut := range []time.Time{lo, hi} {
		_, err := e.s.ListUnfinishedTurns(e.ctx, turnframe.RecoveryScope{UpdatedBefore: cut}, 10)
		is.NoErr(err) // list with a cut-off at a bound
	}

	// The turn moved at MaxTime.
	e.apply(turnframe.Write{Account: acme, Turn: w.Turn, Now: hi, Phase: turnframe.PhaseDelivered})
	m, err := e.s.TurnPhase(e.ctx, acme, w.Turn)
	is.NoErr(err) // marker
	same(m.UpdatedAt, hi, "turn updated at MaxTime")
	same(e.entry(acme, key).UpdatedAt, lo, "entry updated at MinTime")
}

func testTimesTruncated(t *testing.T, e *env) {
	is := is.New(t)
	zone := time.FixedZone("UTC-5", -5*60*60)
	now := at(time.Second + 1234567*time.Nanosecond).In(zone) // 1.001234567s
	want := at(time.Second + 1234*time.Microsecond)           // 1.001234s, UTC
	turn, key, attempt := e.running(acme, "booking/1", now)
	got, err := e.s.LoadTurn(e.ctx, acme, turn)
	is.NoErr(err)                                // load turn
	is.True(got.UpdatedAt.Equal(want))           // truncated to the microsecond
	is.Equal(got.UpdatedAt.Location(), time.UTC) // in UTC
	entry := e.entry(acme, key)
	is.True(entry.AdmittedAt.Equal(want))            // admitted at, truncated
	is.True(entry.LeaseUntil.Equal(want.Add(lease))) // the lease runs from the stored time
	is.Equal(entry.LeaseUntil.Location(), time.UTC)  // in UTC

	a := e.commit(acme, turn, key, attempt, now, nil, []turnframe.OutboxMessage{message("")})
	is.True(e.row(a.Outbox[0].ID).CreatedAt.Equal(want)) // created at, truncated
	odd := lease + 500*time.Nanosecond
	cs, err := e.s.ClaimDue(e.ctx, now, 1, worker, odd)
	is.NoErr(err)        // claim with a lease finer than a microsecond
	is.Equal(len(cs), 1) // the row
	r := e.row(cs[0].ID)
	is.True(r.ClaimedAt.Equal(want))              // claimed at, truncated
	is.True(r.LeaseUntil.Equal(want.Add(lease)))  // the lease end, truncated
	is.True(cs[0].LeaseUntil.Equal(r.LeaseUntil)) // the claim says what the row holds
	is.Equal(r.LeaseUntil.Location(), time.UTC)   // in UTC

	subject := turnframe.TurnSubject(acme, turn)
	is.NoErr(e.s.RecordEvidence(e.ctx, turnframe.NewEvidence(subject, "", turnframe.ActorOperator, "", "", "", now))) // evidence at a time finer than a microsecond
	for _, rec := range e.history(subject) {
		is.True(rec.At.Equal(want))           // recorded at the stored time, truncated
		is.Equal(rec.At.Location(), time.UTC) // in UTC
	}
}
