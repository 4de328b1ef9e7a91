package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/turnframe/turnframe"
)

// The reference model of the outbox: a list of rows in enqueue order and
// the rules of the OutboxStore contract (claims, leases, settlements,
// expiries, releases, resolutions, requeues, pruning, and the audit trail
// each move appends) written as plainly as they read, independent of any
// store. testOrderedModel drives a store and the model with the same random
// steps and fails at the first step where they disagree.

type modelRow struct {
	id          turnframe.OutboxID
	account     turnframe.AccountID
	orderKey    string
	status      turnframe.OutboxStatus
	due         time.Time
	attempts    int
	attemptBase int
	worker      string
	claimedAt   time.Time
	leaseUntil  time.Time // Dispatching: when the claim's lease ends
	lastCode    string
	finished    time.Time
	// history is the row's audit trail, one "from>to@actor" per move.
	history []string
}

// move sets r's status to to, recorded as made by actor.
func (r *modelRow) move(to turnframe.OutboxStatus, actor string) {
	r.history = append(r.history, r.status.String()+">"+to.String()+"@"+actor)
	r.status = to
}

// mayIntervene is the rule of who moves a row that needs intervention: the
// app (also when no actor is named) or a person, never turnframe's
// recovery, policy or workers.
func mayIntervene(actor turnframe.Actor) bool {
	return actor != turnframe.ActorRecovery && actor != turnframe.ActorPolicy && !strings.HasPrefix(string(actor), "worker:")
}

type outboxModel struct {
	rows []*modelRow // enqueue order
}

func (m *outboxModel) find(id turnframe.OutboxID) *modelRow {
	for _, r := range m.rows {
		if r.id == id {
			return r
		}
	}
	return nil
}

// heldBack reports whether an earlier row of r's account and non-empty order
// key is Pending, Dispatching, OutcomeUnknown or NeedsIntervention.
func (m *outboxModel) heldBack(i int) bool {
	r := m.rows[i]
	if r.orderKey == "" {
		return false
	}
	for _, earlier := range m.rows[:i] {
		if earlier.account != r.account || earlier.orderKey != r.orderKey {
			continue
		}
		switch earlier.status {
		case turnframe.OutboxPending, turnframe.OutboxDispatching, turnframe.OutboxOutcomeUnknown, turnframe.OutboxNeedsIntervention:
			return true
		}
	}
	return false
}

// claim returns the rows a claim at now takes, in claim order, and marks
// them claimed, leased until now + d.
func (m *outboxModel) claim(now time.Time, limit int, worker string, d time.Duration) []turnframe.OutboxID {
	var due []*modelRow
	for i, r := range m.rows {
		if r.status == turnframe.OutboxPending && !r.due.After(now) && !m.heldBack(i) {
			due = append(due, r)
		}
	}
	// Stable: rows due at the same time stay in enqueue order.
	sort.SliceStable(due, func(a, b int) bool { return due[a].due.Before(due[b].due) })
	if len(due) > limit {
		due = due[:limit]
	}
	ids := make([]turnframe.OutboxID, len(due))
	for i, r := range due {
		r.move(turnframe.OutboxDispatching, "worker:"+worker)
		r.attempts, r.worker, r.claimedAt = r.attempts+1, worker, now
		r.leaseUntil = now.Add(d)
		ids[i] = r.id
	}
	return ids
}

// holds reports whether c is still the claim on its row.
func (m *outboxModel) holds(c turnframe.Claim) bool {
	r := m.find(c.ID)
	return r != nil && r.status == turnframe.OutboxDispatching && r.worker == c.Worker && r.attempts == c.Attempts
}

// settle settles the row c holds; the caller checked that it does.
func (m *outboxModel) settle(c turnframe.Claim, to turnframe.OutboxStatus, code string, retryAt, now time.Time) {
	r := m.find(c.ID)
	r.move(to, "worker:"+c.Worker)
	r.lastCode, r.leaseUntil = code, time.Time{}
	switch to {
	case turnframe.OutboxPending:
		r.due = retryAt
	case turnframe.OutboxCompleted, turnframe.OutboxFailed:
		r.finished = now
	}
}

// extend moves the lease of the row c holds to now + d, never backwards,
// and reports whether c still held it.
func (m *outboxModel) extend(c turnframe.Claim, now time.Time, d time.Duration) bool {
	if !m.holds(c) {
		return false
	}
	r := m.find(c.ID)
	if until := now.Add(d); until.After(r.leaseUntil) {
		r.leaseUntil = until
	}
	return true
}

// expire expires every claim whose lease ended at now, in enqueue order:
// its send may have started, so its outcome is unknown, with the code that
// says why; due time and attempts kept.
func (m *outboxModel) expire(now time.Time) []turnframe.OutboxID {
	var ids []turnframe.OutboxID
	for _, r := range m.rows {
		if r.status == turnframe.OutboxDispatching && !r.leaseUntil.After(now) {
			r.move(turnframe.OutboxOutcomeUnknown, "recovery")
			r.leaseUntil, r.lastCode = time.Time{}, turnframe.CodeLeaseEnded
			ids = append(ids, r.id)
		}
	}
	return ids
}

// resolve applies a resolution: the error Resolve must return. An unknown
// row moves by any verdict; a row that needs intervention by any but
// escalate, and only for an actor that may intervene.
func (m *outboxModel) resolve(id turnframe.OutboxID, v turnframe.Verdict, actor turnframe.Actor, code string, now time.Time) error {
	r := m.find(id)
	switch {
	case r == nil:
		return turnframe.ErrNotFound
	case r.status == turnframe.OutboxOutcomeUnknown:
	case r.status == turnframe.OutboxNeedsIntervention && v != turnframe.VerdictEscalate && mayIntervene(actor):
	default:
		return turnframe.ErrConflict
	}
	if actor == "" {
		actor = turnframe.ActorApp
	}
	r.lastCode = code
	switch v {
	case turnframe.VerdictCompleted:
		r.move(turnframe.OutboxCompleted, string(actor))
		r.finished = now
	case turnframe.VerdictFailed:
		r.move(turnframe.OutboxFailed, string(actor))
		r.finished = now
	case turnframe.VerdictResend:
		r.move(turnframe.OutboxPending, string(actor))
		r.due = now
	case turnframe.VerdictEscalate:
		r.move(turnframe.OutboxNeedsIntervention, string(actor))
	}
	return nil
}

// releaseOne force-releases one row: the error ReleaseClaim must return.
func (m *outboxModel) releaseOne(id turnframe.OutboxID) error {
	r := m.find(id)
	switch {
	case r == nil:
		return turnframe.ErrNotFound
	case r.status != turnframe.OutboxDispatching:
		return turnframe.ErrConflict
	}
	r.move(turnframe.OutboxPending, "operator")
	r.leaseUntil = time.Time{}
	return nil
}

func (m *outboxModel) prune(before time.Time) int {
	n := len(m.rows)
	m.rows = slices.DeleteFunc(m.rows, func(r *modelRow) bool {
		return (r.status == turnframe.OutboxCompleted || r.status == turnframe.OutboxFailed) && r.finished.Before(before)
	})
	return n - len(m.rows)
}

func (m *outboxModel) withStatus(s turnframe.OutboxStatus) []*modelRow {
	var rs []*modelRow
	for _, r := range m.rows {
		if r.status == s {
			rs = append(rs, r)
		}
	}
	return rs
}

func sortedIDs(ids []turnframe.OutboxID) []turnframe.OutboxID {
	ids = slices.Clone(ids)
	slices.SortFunc(ids, func(a, b turnframe.OutboxID) int { return a.Compare(b) })
	return ids
}

func testOrderedModel(t *testing.T, e *env) {
	seeds := []uint64{1, 2, 3, 4, 5}
	steps := 500
	if testing.Short() {
		seeds, steps = seeds[:2], 200
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed_%d", seed), func(t *testing.T) {
			runModel(t, newEnv(t, e.open), seed, steps)
		})
	}
}

func runModel(t *testing.T, e *env, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 0x7475726e))
	m := &outboxModel{}
	now := base
	var held []turnframe.Claim  // claims not settled yet (some may be stale)
	var every []turnframe.Claim // every claim ever made
	accounts := []turnframe.AccountID{acme, globex}
	orderKeys := []string{"", "x", "x", "y"}
	workers := []string{"w1", "w2", "w3"}

	step := 0
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d step %d: %s", seed, step, fmt.Sprintf(format, args...))
	}
	check := func(what string, err, want error) {
		t.Helper()
		if want == nil && err != nil || want != nil && !errors.Is(err, want) {
			fail("%s: got error %v, want %v", what, err, want)
		}
	}
	settleTo := []turnframe.OutboxStatus{turnframe.OutboxCompleted, turnframe.OutboxPending, turnframe.OutboxFailed, turnframe.OutboxOutcomeUnknown}
	actors := []turnframe.Actor{"", turnframe.ActorPolicy, turnframe.ActorOperator, turnframe.ActorRecovery, "worker:w1", "app:support"}
	leases := []time.Duration{2 * time.Second, lease, 30 * time.Second}
	// pick returns a claim to present: mostly one not settled yet, sometimes
	// any claim ever made (likely stale). ok is false when none was made.
	pick := func() (c turnframe.Claim, ok bool) {
		if len(every) == 0 {
			return c, false
		}
		if len(held) > 0 && rng.IntN(8) != 0 {
			i := rng.IntN(len(held))
			c = held[i]
			held = slices.Delete(held, i, i+1)
			return c, true
		}
		return every[rng.IntN(len(every))], true
	}

	for step = 0; step < steps; step++ {
		was := m.snapshot()
		now = now.Add(time.Duration(rng.IntN(3)) * time.Second)
		switch p := rng.IntN(100); {
		case p < 20: // enqueue one command's rows
			account := accounts[rng.IntN(len(accounts))]
			msgs := make([]turnframe.OutboxMessage, 1+rng.IntN(3))
			for i := range msgs {
				msgs[i] = message(orderKeys[rng.IntN(len(orderKeys))])
				if rng.IntN(5) == 0 {
					msgs[i].NotBefore = now.Add(time.Duration(1+rng.IntN(4)) * time.Second)
				}
			}
			c := turnframe.CaseKey(e.fresh("case"))
			key := e.freshKey()
			attempt := e.ids.AttemptID(now)
			w := e.beginWrite(account, now)
			w.Admit = []turnframe.Command{command(key, c)}
			w.Settle = []turnframe.Settlement{take(key, attempt, turnframe.AttemptID{})}
			_, err := e.s.Apply(e.ctx, w)
			check("begin", err, nil)
			a, err := e.s.Apply(e.ctx, commitWrite(account, w.Turn, key, attempt, now, nil, msgs))
			check("commit", err, nil)
			for i, r := range a.Outbox {
				due := now
				if msgs[i].NotBefore.After(now) {
					due = msgs[i].NotBefore
				}
				m.rows = append(m.rows, &modelRow{id: r.ID, account: account, orderKey: msgs[i].OrderKey, status: turnframe.OutboxPending, due: due,
					history: []string{">pending@app"}})
			}

		case p < 42: // claim, under a lease of some length
			limit, w, d := 1+rng.IntN(4), workers[rng.IntN(len(workers))], leases[rng.IntN(len(leases))]
			cs, err := e.s.ClaimDue(e.ctx, now, limit, w, d)
			check("claim", err, nil)
			want := m.claim(now, limit, w, d)
			if got := claimedIDs(cs); !slices.Equal(got, want) {
				fail("claim(limit %d) at +%v: store claimed %v, model %v", limit, now.Sub(base), got, want)
			}
			for _, c := range cs {
				if !c.LeaseUntil.Equal(now.Add(d)) {
					fail("claim of %v at +%v for %v: leased until +%v", c.ID, now.Sub(base), d, c.LeaseUntil.Sub(base))
				}
			}
			held = append(held, cs...)
			every = append(every, cs...)

		case p < 66: // settle one claim, or a batch, sometimes a stale one
			n := 1
			if rng.IntN(4) == 0 {
				n = 1 + rng.IntN(3)
			}
			single := n == 1 && rng.IntN(2) == 0 // through CompleteClaim, RetryClaim, FailClaim or MarkClaimUnknown
			var sts []turnframe.OutboxSettlement
			var wants []error
			chosen := make(map[turnframe.OutboxID]bool)
			for range n {
				c, ok := pick()
				if !ok || chosen[c.ID] {
					continue // one settlement per row in a batch keeps the expectation simple
				}
				chosen[c.ID] = true
				to := settleTo[rng.IntN(len(settleTo))]
				code := fmt.Sprintf("code-%d", step)
				if single && (to == turnframe.OutboxCompleted || to == turnframe.OutboxOutcomeUnknown) {
					code = "" // CompleteClaim and MarkClaimUnknown take no code
				}
				st := turnframe.OutboxSettlement{Claim: c, To: to, Code: code, RemoteRef: "ref", Now: now}
				if to == turnframe.OutboxPending {
					st.RetryAt = now.Add(time.Duration(rng.IntN(4)) * time.Second)
				}
				var want error
				if !m.holds(c) {
					want = turnframe.ErrClaimLost
				} else {
					m.settle(c, to, code, st.RetryAt, now)
				}
				sts, wants = append(sts, st), append(wants, want)
			}
			if len(sts) == 0 {
				continue
			}
			if single {
				st := sts[0]
				_, err := SettleByHelper(e.ctx, e.s, st) // the model settles to the four statuses only
				check(fmt.Sprintf("settle %v to %v", st.Claim.ID, st.To), err, wants[0])
				break
			}
			results, err := e.s.Settle(e.ctx, sts)
			check("settle batch", err, nil)
			if len(results) != len(sts) {
				fail("settle batch: %d results for %d settlements", len(results), len(sts))
			}
			for i := range sts {
				check(fmt.Sprintf("settle batch[%d] %v to %v", i, sts[i].Claim.ID, sts[i].To), results[i], wants[i])
			}

		case p < 74: // extend the leases of some claims, some of them stale
			var cs []turnframe.Claim
			for range 1 + rng.IntN(3) {
				if len(every) == 0 {
					break
				}
				if len(held) > 0 && rng.IntN(4) != 0 {
					cs = append(cs, held[rng.IntN(len(held))]) // extended, still held
				} else {
					cs = append(cs, every[rng.IntN(len(every))])
				}
			}
			if len(cs) == 0 {
				continue
			}
			d := leases[rng.IntN(len(leases))]
			results, err := e.s.ExtendClaims(e.ctx, cs, now, d)
			check("extend", err, nil)
			if len(results) != len(cs) {
				fail("extend: %d results for %d claims", len(results), len(cs))
			}
			for i, c := range cs {
				var want error
				if !m.extend(c, now, d) {
					want = turnframe.ErrClaimLost
				}
				check(fmt.Sprintf("extend[%d] %v", i, c.ID), results[i], want)
			}

		case p < 81: // expire the claims whose lease ended
			ids, err := e.s.ExpireClaims(e.ctx, now)
			check("expire", err, nil)
			if want := m.expire(now); !slices.Equal(ids, want) {
				fail("expire at +%v: store expired %v, model %v (enqueue order)", now.Sub(base), ids, want)
			}

		case p < 85: // force-release one row, whatever its status
			if len(m.rows) == 0 {
				continue
			}
			r := m.rows[rng.IntN(len(m.rows))]
			if d := m.withStatus(turnframe.OutboxDispatching); len(d) > 0 && rng.IntN(3) != 0 {
				r = d[rng.IntN(len(d))]
			}
			id := r.id
			if rng.IntN(10) == 0 {
				id = e.ids.OutboxID(now) // no such row
			}
			want := m.releaseOne(id)
			check(fmt.Sprintf("release claim %v", id), e.s.ReleaseClaim(e.ctx, id, 0, now), want)

		case p < 92: // resolve an uncertain row, or try one in another status, by some actor
			if len(m.rows) == 0 {
				continue
			}
			r := m.rows[rng.IntN(len(m.rows))]
			uncertain := append(m.withStatus(turnframe.OutboxOutcomeUnknown), m.withStatus(turnframe.OutboxNeedsIntervention)...)
			if len(uncertain) > 0 && rng.IntN(4) != 0 {
				r = uncertain[rng.IntN(len(uncertain))]
			}
			v := allVerdicts[rng.IntN(len(allVerdicts))]
			actor := actors[rng.IntN(len(actors))]
			code := fmt.Sprintf("verdict-%d", step)
			from := r.status
			err := e.s.Resolve(e.ctx, turnframe.Resolution{ID: r.id, Verdict: v, Code: code, Actor: actor, Now: now})
			check(fmt.Sprintf("resolve %v row %v by %v as %q", from, r.id, v, actor), err, m.resolve(r.id, v, actor, code, now))

		case p < 96: // requeue a failed row, or try one in another status
			if len(m.rows) == 0 {
				continue
			}
			r := m.rows[rng.IntN(len(m.rows))]
			if failed := m.withStatus(turnframe.OutboxFailed); len(failed) > 0 && rng.IntN(4) != 0 {
				r = failed[rng.IntN(len(failed))]
			}
			at := now.Add(time.Duration(rng.IntN(3)) * time.Second)
			err := e.s.Requeue(e.ctx, r.id, 0, at)
			if r.status != turnframe.OutboxFailed {
				check(fmt.Sprintf("requeue %v row %v", r.status, r.id), err, turnframe.ErrConflict)
				break
			}
			check("requeue", err, nil)
			r.move(turnframe.OutboxPending, "operator")
			r.due, r.attemptBase = at, r.attempts

		default: // prune
			before := now.Add(-time.Duration(rng.IntN(10)) * time.Second)
			n, err := e.s.Prune(e.ctx, before)
			check("prune", err, nil)
			if want := m.prune(before); n != want {
				fail("prune before +%v: store pruned %d, model %d", before.Sub(base), n, want)
			}
		}
		// Every fifth step compares every row (every 25th its history too);
		// the others compare the rows this step moved, one read each, so the
		// suite does not list a growing outbox 2,500 times.
		if last := step == steps-1; last || step%5 == 0 {
			compareModel(t, e, m, fail, last || step%25 == 0)
		} else {
			compareMoved(e, m, was, fail)
		}
	}
}

// compareModel checks every row's status, attempts, attempt base, last
// code, due time, claim holder and lease against the model; and, when
// history is set, every row's audit trail.
func compareModel(t *testing.T, e *env, m *outboxModel, fail func(string, ...any), history bool) {
	t.Helper()
	rows, err := e.s.ListOutbox(e.ctx, turnframe.OutboxFilter{Limit: turnframe.MaxLimit})
	if err != nil {
		fail("list outbox: %v", err)
	}
	if len(rows) != len(m.rows) {
		fail("store holds %d rows, model %d", len(rows), len(m.rows))
	}
	for _, r := range rows {
		want := m.find(r.ID)
		if want == nil {
			fail("store holds row %v the model does not", r.ID)
		}
		compareRow(r, want, fail)
		if !history {
			continue
		}
		recs, err := e.s.History(e.ctx, turnframe.OutboxSubject(r.Account, r.ID), 0, turnframe.MaxLimit)
		if err != nil {
			fail("history of row %v: %v", r.ID, err)
		}
		got := make([]string, len(recs))
		for i, rec := range recs {
			got[i] = rec.From + ">" + rec.To + "@" + string(rec.Actor)
		}
		if !slices.Equal(got, want.history) {
			fail("row %v has the history %v in the store, %v in the model", r.ID, got, want.history)
		}
	}
}

// compareRow checks one row of the store against the model's: its status,
// attempts, due time when pending, attempt base, last code, claim, lease.
func compareRow(r turnframe.OutboxRecord, want *modelRow, fail func(string, ...any)) {
	switch {
	case r.Status != want.status:
		fail("row %v is %v in the store, %v in the model", r.ID, r.Status, want.status)
	case r.Attempts != want.attempts:
		fail("row %v has %d attempts in the store, %d in the model", r.ID, r.Attempts, want.attempts)
	case r.Status == turnframe.OutboxPending && !r.DueAt.Equal(want.due):
		fail("row %v is due at +%v in the store, +%v in the model", r.ID, r.DueAt.Sub(base), want.due.Sub(base))
	case r.AttemptBase != want.attemptBase:
		fail("row %v has attempt base %d in the store, %d in the model", r.ID, r.AttemptBase, want.attemptBase)
	case r.LastCode != want.lastCode:
		fail("row %v has last code %q in the store, %q in the model", r.ID, r.LastCode, want.lastCode)
	case r.Status == turnframe.OutboxDispatching && r.ClaimedBy != want.worker:
		fail("row %v is claimed by %q in the store, %q in the model", r.ID, r.ClaimedBy, want.worker)
	case r.Status == turnframe.OutboxDispatching && !r.ClaimedAt.Equal(want.claimedAt):
		fail("row %v was claimed at +%v in the store, +%v in the model", r.ID, r.ClaimedAt.Sub(base), want.claimedAt.Sub(base))
	case !r.LeaseUntil.Equal(want.leaseUntil):
		fail("row %v is leased until +%v in the store, +%v in the model (zero when not dispatching)", r.ID, r.LeaseUntil.Sub(base), want.leaseUntil.Sub(base))
	}
}

// snapshot returns a copy of every row's state (its history by length),
// for compareMoved to tell which rows a step moved.
func (m *outboxModel) snapshot() map[turnframe.OutboxID]modelRow {
	was := make(map[turnframe.OutboxID]modelRow, len(m.rows))
	for _, r := range m.rows {
		c := *r
		c.history = r.history[:len(r.history):len(r.history)]
		was[r.id] = c
	}
	return was
}

// compareMoved reads each row the model added or changed since was and
// checks it against the model (compareRow).
func compareMoved(e *env, m *outboxModel, was map[turnframe.OutboxID]modelRow, fail func(string, ...any)) {
	for _, want := range m.rows {
		if old, ok := was[want.id]; ok && sameRow(old, *want) {
			continue
		}
		r, err := e.s.GetOutbox(e.ctx, want.id)
		if err != nil {
			fail("get outbox row %v: %v", want.id, err)
		}
		compareRow(r, want, fail)
	}
}

// sameRow reports whether two states of one row are equal, histories by
// length (a row's history only grows).
func sameRow(a, b modelRow) bool {
	ha, hb := len(a.history), len(b.history)
	a.history, b.history = nil, nil
	return ha == hb && reflect.DeepEqual(a, b)
}
