package difftest

import (
	"fmt"

	"github.com/turnframe/turnframe"
)

// approvalKeys are the keys opDecide admits commands that need approval
// under: a universe of their own, so that the first admission of each is
// new and lands AwaitingApproval (a key admitted before with another
// approval requirement is a conflict). The other ops meet these entries
// through the turn's entries, and must refuse to take or settle them alike.
var approvalKeys = []turnframe.IdempotencyKey{"a0", "a1", "a2", "a3"}

// fromKinds name what a settlement's From (the compare-and-set on the
// entry's status) says: nothing, the status read, or a status the entry is
// not in.
var fromKinds = [3]string{"none", "seen", "stale"}

// opDecide plays an approval's life (issues 14 and the fourth attack): a
// command that needs approval is admitted on a turn; then the entry (mostly
// an awaiting one of the turn) is decided — approved or denied, by an actor
// drawn, fenced on the status read, on a stale one or on none, now and then
// with an attempt (which makes it no decision: a decision carries none) —
// and decided a second time, late, as a second person would. Both stores
// must refuse or accept each alike, and record the same.
func (r *runner) opDecide() {
	s, acct, turn := r.slot()
	a, d, e := r.b(), r.b(), r.b()
	cmd := turnframe.Command{Key: approvalKeys[int(a)%len(approvalKeys)], Case: cases[int(a>>2)%len(cases)],
		Name: names[int(a>>4)%len(names)], NeedsApproval: a&0x40 == 0}
	_, errs := r.apply(fmt.Sprintf("decide/admit slot=%d acct=%s key=%s needs=%v", s, acct, cmd.Key, cmd.NeedsApproval),
		turnframe.Write{Account: acct, Turn: turn, Now: r.now, Admit: []turnframe.Command{cmd}})
	r.note("decide/admit " + errClass(errs[0]))
	key := cmd.Key
	if ks := r.withStatus(acct, turn, turnframe.JournalAwaitingApproval); len(ks) > 0 && d&0x80 == 0 {
		key = ks[int(d>>4)%len(ks)]
	}
	r.decide("first", acct, turn, key, d)
	if e&1 == 0 {
		r.decide("second", acct, turn, key, e>>1)
	}
}

// decide applies one decision on key drawn from c: approve or deny, From
// by fromKinds, the actor from resolvers, an attempt now and then. Its
// note names the draw and the stores' answer.
func (r *runner) decide(what string, acct turnframe.AccountID, turn turnframe.TurnID, key turnframe.IdempotencyKey, c byte) {
	approve := c&1 == 0
	st := turnframe.ApprovalSettlement(key, approve)
	e, found := r.entry(acct, key)
	from := fromKinds[int(c>>1)%len(fromKinds)]
	switch from {
	case "seen":
		if found {
			st.From = e.Status
		}
	case "stale":
		st.From = turnframe.JournalPending
		if e.Status == turnframe.JournalPending {
			st.From = turnframe.JournalAwaitingApproval
		}
	}
	shape := "decision"
	if c&0x08 != 0 && c&0x10 != 0 {
		st.Attempt, shape = r.ids.AttemptID(r.now), "with-attempt" // no decision: an attempt's rejection or commit
	}
	actor := resolvers[int(c>>5)&7]
	_, errs := r.apply(fmt.Sprintf("decide/%s key=%s status=%v approve=%v from=%s(%v) shape=%s actor=%q",
		what, key, e.Status, approve, from, st.From, shape, actor),
		turnframe.Write{Account: acct, Turn: turn, Now: r.now, Actor: actor, Note: "decide " + what, Settle: []turnframe.Settlement{st}})
	status := "missing"
	if found {
		status = e.Status.String()
	}
	r.note(fmt.Sprintf("decide/%s/%s/%s/%s/%s %s", what, status, decisionWord(approve), from, shape, errClass(errs[0])))
}

// decisionWord names an approval or a denial in a note.
func decisionWord(approve bool) string {
	if approve {
		return "approve"
	}
	return "deny"
}
