package pgstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
	"github.com/turnframe/turnframe/pgstore/pgtest"
)

// The server's errors become turnframe's sentinels at the boundary, with
// the server's error still in the chain.
func TestTranslate(t *testing.T) {
	tests := []struct {
		name string
		code string
		want error
	}{
		{"AUniqueViolationIsAConflict", "23505", turnframe.ErrConflict},
		{"ASerializationFailureIsBusy", "40001", turnframe.ErrBusy},
		{"ADeadlockIsBusy", "40P01", turnframe.ErrBusy},
		{"ALockNotAvailableIsBusy", "55P03", turnframe.ErrBusy},
		{"AStatementTheSessionNoLongerHoldsIsBusy", "26000", turnframe.ErrBusy},
		{"AFullDiskIsBusy", "53100", turnframe.ErrBusy},
		{"TooManyConnectionsIsBusy", "53300", turnframe.ErrBusy},
		{"AReadOnlySessionIsBusy", "25006", turnframe.ErrBusy},
		{"AServerStartingUpIsBusy", "57P03", turnframe.ErrBusy},
		{"ANulByteInTextIsInvalid", "22021", turnframe.ErrInvalid},
		{"AnotherErrorStaysAsItIs", "42P01", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			pe := &pgconn.PgError{Code: tc.code}
			err := pgstore.Translate(context.Background(), pe)
			if tc.want != nil {
				is.True(errors.Is(err, tc.want)) // the sentinel
			}
			for _, other := range []error{turnframe.ErrConflict, turnframe.ErrBusy, turnframe.ErrInvalid} {
				if other != tc.want {
					is.True(!errors.Is(err, other)) // and no other
				}
			}
			var got *pgconn.PgError
			is.True(errors.As(err, &got)) // the server's error stays in the chain
		})
	}
	t.Run("AFullLockTableSaysWhichSettingToRaise", func(t *testing.T) {
		is := is.New(t)
		for code, words := range map[string]string{"53200": "max_locks_per_transaction", "53300": "max_connections", "53100": "disk full"} {
			err := pgstore.Translate(context.Background(), &pgconn.PgError{Code: code, Message: "out of shared memory"})
			is.True(errors.Is(err, turnframe.ErrBusy))    // it may pass
			is.True(strings.Contains(err.Error(), words)) // and says what ran out
		}
	})
	t.Run("ACancelledContextIsTheContextsError", func(t *testing.T) {
		is := is.New(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := pgstore.Translate(ctx, &pgconn.PgError{Code: "57014"})
		is.True(errors.Is(err, context.Canceled)) // the context's error
	})
	t.Run("AnAppsErrorIsLeftAlone", func(t *testing.T) {
		is := is.New(t)
		err := pgstore.Translate(context.Background(), errors.Join(turnframe.ErrAppWrite, &pgconn.PgError{Code: "23505"}))
		is.True(!errors.Is(err, turnframe.ErrConflict)) // the app's unique violation is not the store's conflict
	})
}

// A deadlock or serialization failure runs the transaction again, up to the
// store's retries, and then is ErrBusy; one that handed itself to an App
// is never run again.
func TestRetries(t *testing.T) {
	deadlock := &pgconn.PgError{Code: "40P01"}
	tests := []struct {
		name      string
		failures  int  // tries that fail with a deadlock
		app       bool // the App ran in each try
		wantTries int
		wantBusy  bool
	}{
		{"ADeadlockIsRetried", 2, false, 3, false},
		{"TooManyDeadlocksAreBusy", 100, false, 4, true},
		{"ATransactionThatRanTheAppIsNotRetried", 1, true, 1, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			s := mustOpen(t, pgstore.WithRetries(3))
			tries := 0
			err := pgstore.RunInTx(s, context.Background(), tc.app, func(try int) error {
				tries++
				if try < tc.failures {
					return deadlock
				}
				return nil
			})
			is.Equal(tries, tc.wantTries)                            // tries
			is.Equal(errors.Is(err, turnframe.ErrBusy), tc.wantBusy) // busy, or landed
			is.Equal(err == nil, !tc.wantBusy)                       // no other error
		})
	}
}

// A pool the application owns and closes makes the store's calls
// ErrClosed; Close of a store from New leaves the pool open.
func TestAppOwnedPool(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.Schema(t))
	is.NoErr(err) // the app's pool
	defer pool.Close()
	s, err := pgstore.New(ctx, pool)
	is.NoErr(err)            // new: the schema is applied
	is.NoErr(s.Close())      // close the store
	is.NoErr(pool.Ping(ctx)) // the pool is still the app's, open
	_, err = s.ListOutbox(ctx, turnframe.OutboxFilter{Limit: 1})
	is.True(errors.Is(err, turnframe.ErrClosed)) // the store is closed

	s2, err := pgstore.New(ctx, pool)
	is.NoErr(err) // a second store on the migrated schema
	pool.Close()
	_, err = s2.ListOutbox(ctx, turnframe.OutboxFilter{Limit: 1})
	is.True(errors.Is(err, turnframe.ErrClosed)) // the app closed its pool
}
