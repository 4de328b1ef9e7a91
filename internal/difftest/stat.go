package difftest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"testing"
)

// reachInputs is how many random inputs TestDecoderReachesRealFlows runs.
const reachInputs = 100

// mustReach are the outcomes every run of reachInputs random inputs must
// reach, each at least once; both stores agreed on every one of them (the
// runner fails on the first disagreement). A decoder that stopped at
// validation would make the whole differential run agree about nothing.
var mustReach = []string{
	// Turns, journal and outbox as before.
	"begin ok", "admit ok", "admit Conflict", "admit Invalid", "commit ok", "commit Conflict", "outcome ok",
	"phase ok", "claim ok", "settle ok", "settle ClaimLost", "expire ok", "resolve ok", "requeue ok",
	"prune ok", "reconcile ok", "ListUnfinishedTurns ok", "bad-write Invalid",
	// Claims under leases: held and lost extensions; expiries a microsecond
	// before, at and after a lease's end; forced releases of every kind.
	"extend held", "extend ClaimLost", "expire@end-1us none", "expire@end some", "expire@end+1us some",
	"claim/expire@end-1us none", "claim/expire@end some",
	"releaseclaim/live ok", "releaseclaim/ended ok", "releaseclaim/not-dispatching Conflict",
	"releaseclaim/missing NotFound", "releaseclaim/zero Invalid",
	// Takes: a correct Prior, a stale one, a live lease, an ended one, the
	// holder renewing, an abandoned turn.
	"take/new/seen/pending ok", "take/new/stale/pending Conflict", "take/new/seen/abandoned Conflict",
	"take/follow/renew-live ok", "take/follow/take-live Conflict", "take/follow/take-before-end Conflict",
	"take/follow/take-at-end ok", "take/follow/renew-at-end ok", "take/follow/take-at-end-zero-prior Conflict",
	"takeover/early Conflict", "takeover/at-end ok", "takeover/superseded Conflict", "takeover/renew ok", "takeover/holder ok",
	// Reconciliation: without an attempt it moves an unknown entry; with
	// one it does not; a resend on an abandoned turn is refused.
	"reconcile/none/outcome_unknown->committed ok", "reconcile/current/outcome_unknown->committed Conflict",
	"resend on abandoned turn Conflict", "resend/reconcile ok",
	// An attempt stranded on an abandoned turn: reconciled only once its
	// lease ended.
	"stranded reconcile@end-1µs Conflict", "stranded reconcile@end0s ok",
	// Write.Advance moving the phase, and skipped without refusing the Write.
	"advance moved", "advance skipped",
	// A new turn adopting a never-settled command of an abandoned one.
	"adopted pending", "adopted executing",
	// Listing with a cursor, and paging through it.
	"listed after a cursor", "pages several",
	// A requeue after exhaustion gives a fresh budget.
	"claim after requeue",
	// Row keys: multi-row commits beside a command keyed like the old
	// scheme's row keys.
	"outbox rows several", "old scheme would collide",
	// Out-of-range times and bad keys at the methods other than Apply, and
	// the valid edges MinTime and MaxTime.
	"bad-call Invalid (range Invalid)", "bad-call ok (range ok)",
	// Issue 13. A reconciliation declares an attempt whose lease ended
	// unknown (refused while it runs), escalates an unknown entry, and only
	// an actor that may intervene settles what needs intervention; the
	// attempt that ran settles nothing once declared unknown.
	"intervene/declare-early Conflict", "intervene/declare-at-end ok", "intervene/late-attempt Conflict",
	"intervene/escalate ok", "intervene/settle/may ok", "intervene/settle/may-not Conflict", "intervene/settle/operator ok",
	"reconcile/none/outcome_unknown->needs_intervention ok",
	// A claim expires only at its lease end, to outcome unknown; Resolve
	// by every verdict, escalation included; from needs intervention for
	// an actor that may, refused to one that may not, and never escalated
	// again.
	"row-intervene/expire-early none", "row-intervene/expire-at-end some", "row-intervene/policy/escalate ok",
	"row-intervene/may/completed ok", "row-intervene/may/resend ok", "row-intervene/may/escalate Conflict",
	"row-intervene/may-not/failed Conflict",
	"resolve/outcome_unknown/escalate ok", "resolve/outcome_unknown/resend ok",
	"resolve/intervention/may ok",
	// The audit trail and the outbox cursor.
	"history some", "history none", "history Invalid", "evidence ok", "evidence NotFound", "evidence Invalid",
	"list after some", "list after NotFound", "outbox pages several", "bad13 Invalid",
	// Issue 15: a Begin under a message id a turn of the account began
	// already, the same message again.
	"redelivered",
	// Approvals: an awaiting entry approved or denied once, by a decision
	// fenced on the status read or on none, refused when fenced on a stale
	// one or when it carries an attempt; a second, late decision of an
	// entry decided since is refused.
	"decide/admit ok",
	"decide/first/awaiting_approval/approve/seen/decision ok", "decide/first/awaiting_approval/deny/none/decision ok",
	"decide/first/awaiting_approval/approve/stale/decision Conflict",
	"decide/first/awaiting_approval/approve/none/with-attempt Conflict",
	"decide/second/pending/approve/seen/decision Conflict", "decide/second/rejected/deny/seen/decision Conflict",
}

// DecoderReachesRealFlows proves the random inputs the differential run
// feeds both stores get past input validation into the states that matter:
// each outcome of mustReach must happen in reachInputs random inputs. Run
// with -v to see every count.
func DecoderReachesRealFlows(t *testing.T, target Target) {
	if raceEnabled && os.Getenv("DIFFTEST_REACH_RACE") == "" {
		// The decoder runs on one goroutine and its counts are fixed by the
		// seed: the race detector adds nothing here but twenty times the
		// time (two minutes). DIFFTEST_REACH_RACE=1 runs it anyway.
		t.Skip("the decoder's reach is deterministic: run it without -race (or set DIFFTEST_REACH_RACE=1)")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	stats := map[string]int{}
	for range reachInputs {
		r := newRunner(t, randomInput(rng), openWorlds(t, target))
		r.stats = stats
		r.run()
	}
	var lines []string
	for k, v := range stats {
		lines = append(lines, fmt.Sprintf("%-60s %d", k, v))
	}
	sort.Strings(lines)
	t.Log("\n" + strings.Join(lines, "\n"))
	for _, want := range mustReach {
		if stats[want] == 0 {
			t.Errorf("no random input reached %q", want)
		}
	}
}
