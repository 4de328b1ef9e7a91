package difftest

import (
	"fmt"
	"time"

	"github.com/turnframe/turnframe"
)

// compareFinal compares everything both stores hold.
func (r *runner) compareFinal() {
	r.t.Helper()
	ctx := r.ctx
	r.checkRowKeys("the last op")
	r.do("final ListOutbox", func(w *world) (any, error) {
		return w.store.ListOutbox(ctx, turnframe.OutboxFilter{Limit: turnframe.MaxLimit})
	})
	r.do("final ListUnfinishedTurns", func(w *world) (any, error) {
		return w.store.ListUnfinishedTurns(ctx, turnframe.RecoveryScope{}, turnframe.MaxLimit)
	})
	for _, acct := range accounts {
		for i, turn := range r.allTurns {
			r.do(fmt.Sprintf("final turn %s/%d", acct, i), func(w *world) (any, error) {
				m, err := w.store.TurnPhase(ctx, acct, turn)
				if err != nil {
					return nil, err
				}
				st, err := w.store.LoadTurn(ctx, acct, turn)
				if err != nil {
					return nil, fmt.Errorf("load turn after phase: %w", err)
				}
				rep, rerr := w.store.Replay(ctx, acct, turn)
				entries, err := w.store.ForTurn(ctx, acct, turn)
				return "marker=" + dump(m) + " turn=" + dump(st) + " replay=" + errClass(rerr) + dump(rep) + " entries=" + dump(entries), err
			})
		}
		for _, key := range keys {
			r.do(fmt.Sprintf("final key %s/%s", acct, key), func(w *world) (any, error) { return w.store.ByKey(ctx, acct, key) })
		}
		for _, cs := range cases {
			r.do(fmt.Sprintf("final case %s/%s", acct, cs), func(w *world) (any, error) {
				rev, err := w.store.CaseRevision(ctx, acct, cs)
				if err != nil {
					return nil, err
				}
				evs, err := w.store.EventsSince(ctx, acct, cs, 0, turnframe.MaxLimit)
				return fmt.Sprintf("rev=%d ", rev) + dump(evs), err
			})
		}
		r.do("final events by id "+string(acct), func(w *world) (any, error) { return w.store.EventsByID(ctx, acct, w.events) })
	}
	r.do("final rows one by one", func(w *world) (any, error) {
		var out []string
		for _, id := range w.outbox {
			rec, err := w.store.GetOutbox(ctx, id)
			out = append(out, errClass(err)+" "+dump(rec))
		}
		return out, nil
	})
	r.compareHistories()
}

// compareClosed closes every store and checks that each method then says
// ErrClosed.
func (r *runner) compareClosed() {
	r.t.Helper()
	ctx := r.ctx
	r.do("close", func(w *world) (any, error) { return nil, w.store.Close() })
	acct, turn := accounts[0], r.allTurns[0]
	r.do("apply after close", func(w *world) (any, error) {
		return w.store.Apply(ctx, turnframe.Write{Account: acct, Turn: turn, Now: r.now, Phase: turnframe.PhaseAbandoned})
	})
	r.do("claim after close", func(w *world) (any, error) { return w.store.ClaimDue(ctx, r.now, 1, "w1", time.Second) })
	r.do("extend after close", func(w *world) (any, error) {
		return w.store.ExtendClaims(ctx, []turnframe.Claim{claimAt(w, 0)}, r.now, time.Second)
	})
	unknown := r.ids.OutboxID(r.now)
	r.do("release claim after close", func(w *world) (any, error) {
		return nil, w.store.ReleaseClaim(ctx, outboxAt(w, 0, unknown), 0, r.now)
	})
	r.do("read after close", func(w *world) (any, error) { return w.store.TurnPhase(ctx, acct, turn) })
	r.do("expire after close", func(w *world) (any, error) { return w.store.ExpireClaims(ctx, r.now) })
	r.do("history after close", func(w *world) (any, error) {
		return w.store.History(ctx, turnframe.TurnSubject(acct, turn), 0, 10)
	})
	r.do("evidence after close", func(w *world) (any, error) {
		return nil, w.store.RecordEvidence(ctx, turnframe.NewEvidence(turnframe.TurnSubject(acct, turn), "", turnframe.ActorOperator, "", "", "", r.now))
	})
	r.do("list after close", func(w *world) (any, error) {
		return w.store.ListOutbox(ctx, turnframe.OutboxFilter{Limit: 1})
	})
}
