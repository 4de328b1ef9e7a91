package harness_test

import (
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/internal/crashtest/harness"
)

// TestResentBefore: a command left Pending on an abandoned turn is explained
// only by a reconciliation's resend recorded before the turn's abandonment.
func TestResentBefore(t *testing.T) {
	rec := func(seq int64, from, to, attempt string, evidence bool) turnframe.HistoryRecord {
		return turnframe.HistoryRecord{Seq: seq, From: from, To: to, Attempt: attempt, Evidence: evidence}
	}
	const a = "01M8Y93FYSZ4YTCJA7HJ4JYXHS"
	const b, c = "01M8Y93FYSZ4YTCJA7HJ4JYXHT", "01M8Y93FYSZ4YTCJA7HJ4JYXHV"
	ran := []turnframe.HistoryRecord{
		rec(805, "", "pending", "", false),
		rec(809, "pending", "executing", a, false),
		rec(812, "executing", "outcome_unknown", a, false),
	}
	turn := func(abandonedAt int64) []turnframe.HistoryRecord {
		return []turnframe.HistoryRecord{
			rec(804, "", "received", "", false),
			rec(808, "received", "planned", "", false),
			rec(810, "planned", "executing", "", false),
			rec(abandonedAt, "executing", "abandoned", "", false),
		}
	}
	resent := append(append([]turnframe.HistoryRecord{}, ran...), rec(828, "outcome_unknown", "pending", "", false))
	for _, c := range []struct {
		name      string
		hist      []turnframe.HistoryRecord
		abandoned int64
		want      bool
	}{
		{"resent, then abandoned", resent, 829, true},
		{"resent, then abandoned, then a late answer recorded", append(append([]turnframe.HistoryRecord{}, resent...), rec(840, "pending", "pending", "", true)), 829, true},
		{"resent from needs intervention, then abandoned", append(append([]turnframe.HistoryRecord{}, ran...), rec(820, "outcome_unknown", "needs_intervention", "", false), rec(828, "needs_intervention", "pending", "", false)), 829, true},
		{"abandoned, then resent", resent, 827, false},
		{"never taken", ran[:1], 829, false},
		{"outcome unknown", ran, 829, false},
		{"a pending move under an attempt", append(append([]turnframe.HistoryRecord{}, ran[:2]...), rec(828, "executing", "pending", a, false)), 829, false},
		{"resent, taken and put back before its call, then abandoned", append(append([]turnframe.HistoryRecord{}, resent...),
			rec(830, "pending", "executing", b, false), rec(831, "executing", "pending", b, false)), 832, true},
		{"resent, taken and put back twice, then abandoned", append(append([]turnframe.HistoryRecord{}, resent...),
			rec(830, "pending", "executing", b, false), rec(831, "executing", "pending", b, false),
			rec(833, "pending", "executing", c, false), rec(834, "executing", "pending", c, false)), 835, true},
		{"resent, abandoned, then taken and put back", append(append([]turnframe.HistoryRecord{}, resent...),
			rec(830, "pending", "executing", b, false), rec(831, "executing", "pending", b, false)), 827, false},
		{"resent, taken over once dead, then a pending move", append(append([]turnframe.HistoryRecord{}, resent...),
			rec(830, "pending", "executing", b, false), rec(831, "executing", "executing", c, false), rec(832, "executing", "pending", c, false)), 833, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			is.Equal(harness.ResentBefore(c.hist, turn(c.abandoned)), c.want)
		})
	}
	t.Run("a turn never abandoned", func(t *testing.T) {
		is := is.New(t)
		is.True(!harness.ResentBefore(resent, turn(829)[:3])) // no abandonment: nothing to explain by it
	})
}

// TestExplainRow: a duplicate delivery of a row is explained by the
// policy's resend before its claim, and a claim put back unsent between
// the two (CodeNotSent) neither explains nor hides it. The pgstore crash
// harness once failed on such a row: resent, claimed and put back unsent by
// a stopping sweep, then claimed and sent.
func TestExplainRow(t *testing.T) {
	type rec = turnframe.HistoryRecord
	created := rec{From: "", To: "pending"}
	claim := func(attempt string) rec { return rec{From: "pending", To: "dispatching", Attempt: attempt} }
	expired := rec{From: "dispatching", To: "outcome_unknown", Actor: turnframe.ActorRecovery, Code: turnframe.CodeLeaseEnded}
	resent := rec{From: "outcome_unknown", To: "pending", Actor: turnframe.ActorPolicy, Code: turnframe.CodeResent}
	unsent := rec{From: "dispatching", To: "pending", Actor: "worker:w", Code: turnframe.CodeNotSent}
	retried := rec{From: "dispatching", To: "pending", Actor: "worker:w", Code: "http.503"}
	late := rec{From: "pending", To: "pending", Evidence: true}
	for _, c := range []struct {
		name    string
		hist    []rec
		attempt int
		want    bool
	}{
		{"claimed after the policy's resend", []rec{created, claim("1"), expired, resent, claim("2")}, 2, true},
		{"claimed after the resend, a claim put back unsent between", []rec{created, claim("1"), expired, resent, claim("2"), unsent, claim("3")}, 3, true},
		{"the same, with a late answer recorded", []rec{created, claim("1"), expired, resent, late, claim("2"), unsent, claim("3")}, 3, true},
		{"claimed after a retryable answer", []rec{created, claim("1"), retried, claim("2")}, 2, false},
		{"a claim put back unsent after a retryable answer", []rec{created, claim("1"), retried, claim("2"), unsent, claim("3")}, 3, false},
		{"the first claim, put back unsent, then claimed", []rec{created, claim("1"), unsent, claim("2")}, 2, false},
		{"no claim of the attempt", []rec{created, claim("1")}, 2, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			ok, why := harness.ExplainRow(c.hist, c.attempt)
			is.Equal(ok, c.want) // explained
			is.True(why != "")   // and said why
		})
	}
}

// TestResentNeverReceived: only a resend after a lookup found the remote
// never had the command says the remote must not have it. The sqlite crash
// harness once failed on a command resent to a deduplicating remote after
// a timeout, then abandoned with its turn: the timed-out attempt had
// reached the remote, as it may.
func TestResentNeverReceived(t *testing.T) {
	type rec = turnframe.HistoryRecord
	ran := []rec{{To: "pending"}, {From: "pending", To: "executing", Attempt: "a"}, {From: "executing", To: "outcome_unknown", Attempt: "a"}}
	with := func(last ...rec) []rec { return append(append([]rec{}, ran...), last...) }
	for _, c := range []struct {
		name string
		hist []rec
		want bool
	}{
		{"resent after not happened", with(rec{From: "outcome_unknown", To: "pending", Actor: turnframe.ActorPolicy, Code: turnframe.CodeVerifiedNotHappened}), true},
		{"the same, a late answer after it", with(rec{From: "outcome_unknown", To: "pending", Actor: turnframe.ActorPolicy, Code: turnframe.CodeVerifiedNotHappened},
			rec{From: "pending", To: "pending", Evidence: true}), true},
		{"resent to a deduplicating remote", with(rec{From: "outcome_unknown", To: "outcome_unknown", Evidence: true},
			rec{From: "outcome_unknown", To: "pending", Actor: turnframe.ActorPolicy, Code: turnframe.CodeResent}), false},
		{"resent by another actor", with(rec{From: "outcome_unknown", To: "pending", Actor: "crash"}), false},
		{"resent after not happened, then taken and put back before its call", with(rec{From: "outcome_unknown", To: "pending", Actor: turnframe.ActorPolicy, Code: turnframe.CodeVerifiedNotHappened},
			rec{From: "pending", To: "executing", Attempt: "b"}, rec{From: "executing", To: "pending", Attempt: "b"}), true},
		{"still unknown", ran, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			is.Equal(harness.ResentNeverReceived(c.hist), c.want)
		})
	}
}
