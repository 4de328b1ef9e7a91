package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
)

// A cancel request that reaches a backend while a live call's statement runs
// on it — a late one of Open's cancel-request handler (pgx's only guard is
// to wait 100 ms after sending it), or an operator's pg_cancel_backend —
// fails the statement with 57014 under a context that never ended. The
// transaction was rolled back, nothing written: §4's ErrBusy ("nothing was
// written, the same call may be tried again"), as lock_timeout's 55P03 is.
// The store hands up the raw driver error, which the dispatcher treats as
// final: a completed send's settlement is given up ("settle it by hand").
func TestAStrayCancelOnALiveSettlementIsBusy(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s := mustOpen(t, pgstore.WithClock(pgstore.CallerClock))
	other, err := pgx.Connect(ctx, s.Pool().Config().ConnConfig.ConnString())
	is.NoErr(err)
	defer other.Close(ctx)
	now := onePayment(t, s)
	claims, err := s.ClaimDue(ctx, now, 10, "w", time.Minute)
	is.NoErr(err)
	is.Equal(len(claims), 1)

	// Hold the row so the settlement's statement is running (waiting) when
	// the cancel lands.
	otx, err := other.Begin(ctx)
	is.NoErr(err)
	_, err = otx.Exec(ctx, `SELECT 1 FROM outbox WHERE id = $1 FOR UPDATE`, claims[0].ID.String())
	is.NoErr(err)

	res := make(chan error, 1)
	go func() {
		r, err := s.Settle(ctx, []turnframe.OutboxSettlement{{Claim: claims[0], To: turnframe.OutboxCompleted, Now: now}})
		if err == nil {
			err = r[0]
		}
		res <- err
	}()
	cancelMyWaiter(t, other) // an operator's pg_cancel_backend, say
	err = <-res
	is.NoErr(otx.Rollback(ctx))
	t.Logf("settle cut by a stray cancel: %v", err)
	is.True(err != nil)
	is.True(errors.Is(err, turnframe.ErrBusy)) // nothing written: try again
}
