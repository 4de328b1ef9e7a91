package pgstore_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/turnframe/turnframe/pgstore"
	"github.com/turnframe/turnframe/pgstore/pgtest"
)

// mustOpen opens a store on a fresh schema (pgtest.Schema), closed when t
// ends.
func mustOpen(t testing.TB, opts ...pgstore.Option) *pgstore.Store {
	t.Helper()
	s, err := pgstore.Open(context.Background(), pgtest.Schema(t), opts...)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// storeOnPool returns a store in clock's frame, with opts, on a pool of
// its own over cfg (which set tracers or dialers), both closed when t ends.
func storeOnPool(t *testing.T, cfg *pgxpool.Config, clock pgstore.Clock, opts ...pgstore.Option) *pgstore.Store {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("pool: %v", err)
	}
	t.Cleanup(pool.Close)
	s, err := pgstore.New(ctx, pool, append([]pgstore.Option{pgstore.WithClock(clock)}, opts...)...)
	if err != nil {
		t.Fatalf("new: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
