package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
)

// pgx prepares and caches each statement per connection. An application
// that resets the sessions of its pool — DEALLOCATE ALL, or DISCARD ALL as
// a connection pooler's reset query does — takes them away on the server
// while pgx still names them: the store's next statement on that
// connection failed with SQLSTATE 26000 (no such prepared statement),
// which it passed on raw. A completed send's settlement met it and was
// given up (DESIGN.md §8: "A settlement always lands"; only ErrBusy is
// tried again): the row stayed Dispatching, Unsettled, to be expired to
// OutcomeUnknown once its lease ended and, with no Remote declared, sent
// again. Nothing ran (the statement was never bound), pgx forgets the
// statement with its error, and the same call succeeds when tried again:
// it is ErrBusy, and a transaction the store runs is run again.
func TestASettlementAfterTheAppDeallocatedTheSessionsStatementsLands(t *testing.T) {
	eachClock(t, func(t *testing.T, clock pgstore.Clock) {
		is := is.New(t)
		ctx := context.Background()
		s := oneConnStore(t, pgstore.WithClock(clock))
		now := onePayment(t, s)

		sends := 0
		sender := turnframe.SenderFunc(func(ctx context.Context, e turnframe.OutboxEntry) turnframe.Dispatched {
			sends++
			_, err := s.Pool().Exec(ctx, "DEALLOCATE ALL") // the app resets its session meanwhile
			is.NoErr(err)
			return turnframe.Dispatched{Kind: turnframe.DispatchCompleted}
		})
		d := turnframe.NewDispatcher(s, sender, turnframe.DefaultDispatchConfig("w"))
		report, err := d.RunOnce(ctx, now)
		is.NoErr(err)
		t.Logf("report: %+v", report)
		is.Equal(sends, 1)
		is.Equal(len(report.Unsettled), 0) // the completed send's settlement landed
		rows, err := s.ListOutbox(ctx, turnframe.OutboxFilter{Limit: 10})
		is.NoErr(err)
		is.Equal(rows[0].Status, turnframe.OutboxCompleted) // and the row says so

		// A call meeting the reset session is run again, or is ErrBusy
		// (a claim, here), never a raw driver error.
		is.NoErr(enqueueRows(ctx, s, turnframe.NewIDGenerator(), "acme", "pay-2", now, turnframe.OutboxMessage{Destination: "d"}))
		_, err = s.Pool().Exec(ctx, "DEALLOCATE ALL")
		is.NoErr(err)
		claims, err := s.ClaimDue(ctx, now, 10, "w", time.Minute)
		t.Logf("claim on the reset session: %v", err)
		if err != nil {
			is.True(errors.Is(err, turnframe.ErrBusy)) // nothing written, try again
			claims, err = s.ClaimDue(ctx, now, 10, "w", time.Minute)
			is.NoErr(err)
		}
		is.Equal(len(claims), 1)
	})
}
