package difftest

import (
	"fmt"
	"time"

	"github.com/turnframe/turnframe"
)

// opIntervene plays a command's uncertain life (issue 13): taken under a
// short lease; declared unknown by recovery a microsecond before its lease
// ends (refused) and at its end; settled late by the attempt that ran
// (refused) or not; escalated by the policy; then settled by an actor drawn
// (refused to the policy, recovery and a worker), and if refused, by an
// operator.
func (r *runner) opIntervene() {
	s, acct, turn := r.busySlot()
	key := r.keyOf(acct, turn)
	f, l := r.b(), r.b()
	ls := leaseChoices[l&3]
	att := r.ids.AttemptID(r.now)
	vals, errs := r.apply(fmt.Sprintf("intervene/take slot=%d key=%s lease=%v", s, key, ls), turnframe.Write{Account: acct, Turn: turn, Now: r.now,
		Advance: turnframe.PhaseExecuting,
		Settle:  []turnframe.Settlement{{Key: key, To: turnframe.JournalExecuting, Attempt: att, Prior: r.current(acct, key), Lease: ls}}})
	if errs[0] != nil {
		return
	}
	end := vals[0].(turnframe.Applied).Settled[0].LeaseUntil
	move := func(what string, at time.Time, actor turnframe.Actor, st turnframe.Settlement) string {
		_, errs := r.apply(fmt.Sprintf("intervene/%s key=%s actor=%q", what, key, actor), turnframe.Write{Account: acct, Turn: turn, Now: at,
			Actor: actor, Note: what, Settle: []turnframe.Settlement{st}})
		class := errClass(errs[0])
		r.note("intervene/" + what + " " + class)
		return class
	}
	declare := turnframe.Settlement{Key: key, To: turnframe.JournalOutcomeUnknown, Code: turnframe.CodeLeaseEnded}
	move("declare-early", end.Add(-time.Microsecond), turnframe.ActorRecovery, declare)
	move("declare-at-end", end, turnframe.ActorRecovery, declare)
	if f&1 == 0 {
		move("late-attempt", end.Add(time.Microsecond), "", turnframe.Settlement{Key: key, To: turnframe.JournalCommitted, Attempt: att})
	}
	move("escalate", end.Add(2*time.Microsecond), turnframe.ActorPolicy,
		turnframe.Settlement{Key: key, To: turnframe.JournalNeedsIntervention, Code: turnframe.CodeNoSafeResolution})
	to := []turnframe.JournalStatus{turnframe.JournalCommitted, turnframe.JournalRejected, turnframe.JournalPending}[int(f>>4)%3]
	st := turnframe.Settlement{Key: key, To: to}
	switch to {
	case turnframe.JournalCommitted:
		st.RemoteRef = "ref-i"
	case turnframe.JournalRejected:
		st.Code = "refunded"
	}
	actor := resolvers[f>>1&7]
	if move("settle/"+mayIntervene(actor), end.Add(3*time.Microsecond), actor, st) != "ok" {
		move("settle/operator", end.Add(4*time.Microsecond), turnframe.ActorOperator, st)
	}
}

// opRowIntervene plays an outbox row's uncertain life: claimed under a
// short lease; expired a microsecond before its lease ends (nothing) and
// at its end (outcome unknown); resolved by the policy (escalated, or a
// verdict); then by an actor drawn, with a verdict drawn.
func (r *runner) opRowIntervene() {
	worker := pick(r, workers)
	l, f := r.b(), r.b()
	ls := leaseChoices[l&3]
	batch := map[*world][]turnframe.Claim{}
	vals, errs := r.do(fmt.Sprintf("row-intervene/claim worker=%s lease=%v", worker, ls), func(w *world) (any, error) {
		cs, err := w.store.ClaimDue(r.ctx, r.now, 1, worker, ls)
		w.claims = append(w.claims, cs...)
		batch[w] = cs
		return cs, err
	})
	if errs[0] != nil || len(vals[0].([]turnframe.Claim)) == 0 {
		return
	}
	end := vals[0].([]turnframe.Claim)[0].LeaseUntil
	r.expireAt("row-intervene/expire-early", "row-intervene/expire-early", end.Add(-time.Microsecond))
	r.expireAt("row-intervene/expire-at-end", "row-intervene/expire-at-end", end)
	resolve := func(what string, v turnframe.Verdict, actor turnframe.Actor, at time.Time) {
		_, errs := r.do(fmt.Sprintf("row-intervene/%s verdict=%v actor=%q", what, v, actor), func(w *world) (any, error) {
			if len(batch[w]) == 0 {
				return nil, fmt.Errorf("no claim")
			}
			id := batch[w][0].ID
			if err := w.store.Resolve(r.ctx, turnframe.Resolution{ID: id, Verdict: v, Code: "c-" + v.String(), Actor: actor, Note: what, Now: at}); err != nil {
				return nil, err
			}
			return w.store.GetOutbox(r.ctx, id)
		})
		r.note(fmt.Sprintf("row-intervene/%s/%v %s", what, v, errClass(errs[0])))
	}
	policy := turnframe.VerdictEscalate
	if f&3 == 3 {
		policy = turnframe.Verdict(1 + int(f>>2)%3) // the policy settles it
	}
	resolve("policy", policy, turnframe.ActorPolicy, end.Add(time.Microsecond))
	actor := resolvers[f>>4&7]
	resolve(mayIntervene(actor), allVerdicts[int(f>>3)%len(allVerdicts)], actor, end.Add(2*time.Microsecond))
}

// allVerdicts are the verdicts that settle something.
var allVerdicts = []turnframe.Verdict{turnframe.VerdictCompleted, turnframe.VerdictFailed, turnframe.VerdictResend, turnframe.VerdictEscalate}
