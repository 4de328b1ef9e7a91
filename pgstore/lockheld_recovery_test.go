package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
	"github.com/turnframe/turnframe/pgstore/pgtest"
)

// expireSpy reports every ExpireClaims that returns, with what it expired.
type expireSpy struct {
	turnframe.Store
	expired chan []turnframe.OutboxID
}

func (s *expireSpy) ExpireClaims(ctx context.Context, now time.Time) ([]turnframe.OutboxID, error) {
	ids, err := s.Store.ExpireClaims(ctx, now)
	if err == nil {
		select {
		case s.expired <- ids:
		default:
		}
	}
	return ids, err
}

// DESIGN.md §1, Progress: "A lease that ended is released by the next pass
// of Run's release or of Recovery.Run". One tenant's outbox row, whose
// claim ended, is kept locked by another session (an operator's
// `SELECT ... FOR UPDATE` in psql, or a client that died mid-transaction:
// its locks stay until the server notices). Another tenant's claim, ended
// too, must still be released. Run's release (and Recover, scoped to the
// other tenant) used to wait on the locked row under Run's context, which
// never ends while the app runs: no release pass ended, and no ended lease
// of any tenant was released again. ExpireClaims now skips a locked row.
//
// A safety-net time.After of a minute stands for "never": the release
// has no other way to show it hangs.
func TestOneLockedRowNeverStallsAnotherTenantsRelease(t *testing.T) {
	for _, via := range []string{"dispatcher run", "recover scoped to the other tenant"} {
		t.Run(via, func(t *testing.T) {
			is := is.New(t)
			ctx := context.Background()
			store, acme, globex := deadClaimsOneLocked(t, false)

			spy := &expireSpy{Store: store, expired: make(chan []turnframe.OutboxID, 16)}
			runCtx, stop := context.WithCancel(ctx)
			defer stop()
			done := make(chan struct{})
			switch via {
			case "dispatcher run":
				cfg := turnframe.DefaultDispatchConfig("w1")
				cfg.PollInterval = 10 * time.Millisecond
				sender := turnframe.SenderFunc(func(context.Context, turnframe.OutboxEntry) turnframe.Dispatched {
					return turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200"}
				})
				d := turnframe.NewDispatcher(spy, sender, cfg)
				go func() {
					defer close(done)
					if err := d.Run(runCtx); err != nil {
						t.Errorf("run: %v", err)
					}
				}()
			default:
				r := turnframe.NewRecovery(spy)
				go func() {
					defer close(done)
					_, _ = r.Recover(runCtx, turnframe.RecoveryScope{Account: "globex"}, nopRecoveryHandler{})
				}()
			}
			defer func() { stop(); <-done }()

			select {
			case got := <-spy.expired:
				is.True(len(got) >= 1) // the release ended
				row, err := store.GetOutbox(ctx, globex)
				is.NoErr(err)
				// Released: Run's policy may have resent it and Run claimed it
				// again by now, so the dead worker's claim is what must be gone.
				is.True(row.Status != turnframe.OutboxDispatching || row.ClaimedBy != "dead") // globex's ended claim was released
			case <-time.After(time.Minute): // safety net: stands for "never"
				row, err := store.GetOutbox(ctx, globex)
				is.NoErr(err)
				t.Fatalf("%s: no release ended in a minute while acme's row %v is locked; globex's row %v, whose lease ended an hour ago, is still %v",
					via, acme, globex, row.Status)
			}
		})
	}
}

// deadClaimsOneLocked opens a store on a fresh schema whose callers give
// its times (CallerClock), where a worker that died claimed acme's row and
// globex's an hour ago, for a minute; expired, the claims are expired too.
// Then another session locks acme's row and keeps it, until t ends.
func deadClaimsOneLocked(t *testing.T, expired bool) (s *pgstore.Store, acme, globex turnframe.OutboxID) {
	t.Helper()
	is := is.New(t)
	ctx := context.Background()
	url := pgtest.Schema(t)
	s = mustOpenURL(t, url, pgstore.WithClock(pgstore.CallerClock))
	ids := turnframe.NewIDGenerator()
	past := time.Now().Add(-time.Hour)
	is.NoErr(enqueueRows(ctx, s, ids, "acme", "a1", past, turnframe.OutboxMessage{Destination: "payments"}))
	is.NoErr(enqueueRows(ctx, s, ids, "globex", "g1", past, turnframe.OutboxMessage{Destination: "payments"}))
	claims, err := s.ClaimDue(ctx, past, 10, "dead", time.Minute)
	is.NoErr(err)
	is.Equal(len(claims), 2) // both claimed
	for _, c := range claims {
		if c.Account == "acme" {
			acme = c.ID
		} else {
			globex = c.ID
		}
	}
	if expired {
		ended, err := s.ExpireClaims(ctx, time.Now())
		is.NoErr(err)
		is.Equal(len(ended), 2) // both expired
	}
	_, tx := lockHolder(t, url)
	_, err = tx.Exec(ctx, `SELECT 1 FROM outbox WHERE id = $1 FOR UPDATE`, acme.String())
	is.NoErr(err) // acme's row locked
	return s, acme, globex
}

type nopRecoveryHandler struct{}

func (nopRecoveryHandler) RestartInterpretation(context.Context, turnframe.TurnPhaseMarker, turnframe.RecoveryAction) error {
	return nil
}
func (nopRecoveryHandler) ResumeCommands(context.Context, turnframe.TurnPhaseMarker, turnframe.RecoveryAction) error {
	return nil
}
func (nopRecoveryHandler) RegenerateResponse(context.Context, turnframe.TurnPhaseMarker, turnframe.RecoveryAction) error {
	return nil
}

// The same, one step on: both tenants' rows are OutcomeUnknown (a dead
// worker's claims, expired), and acme's is locked by another session.
// DESIGN.md §1: "An unknown outcome is settled or handed to a person
// within its policy's bounds"; §8: an undeclared destination's unknown row
// is sent again. Run's release hands the rows to the policy one by one;
// its move of acme's row used to wait on the lock under Run's context, so
// globex's row was never handed to its policy, and never sent. A lock now
// waits DefaultLockTimeout at most, and the move is ErrBusy, for a later
// pass.
//
// A safety-net time.After of a minute stands for "never".
func TestOneLockedUnknownRowNeverStallsAnotherTenantsPolicy(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	store, _, _ := deadClaimsOneLocked(t, true)

	globexSent := make(chan struct{}, 1)
	sender := turnframe.SenderFunc(func(_ context.Context, e turnframe.OutboxEntry) turnframe.Dispatched {
		if e.Account == "globex" {
			select {
			case globexSent <- struct{}{}:
			default:
			}
		}
		return turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200"}
	})
	cfg := turnframe.DefaultDispatchConfig("w1")
	cfg.PollInterval = 10 * time.Millisecond
	d := turnframe.NewDispatcher(store, sender, cfg)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := d.Run(runCtx); err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	defer func() { stop(); <-done }()
	select {
	case <-globexSent:
	case <-time.After(time.Minute): // safety net: stands for "never"
		rows, err := store.ListOutbox(ctx, turnframe.OutboxFilter{Limit: 10})
		is.NoErr(err)
		for _, r := range rows {
			t.Logf("%s %v: %v", r.Account, r.ID, r.Status)
		}
		t.Fatal("globex's unknown row, of an undeclared destination, was never sent again while acme's row is locked")
	}
}
