package pgstore_test

import (
	"context"
	"testing"

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
