package turnframe_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/memstore"
	"github.com/turnframe/turnframe/sqlitestore"
)

// eachStore runs f as one subtest per store implementation, each with a fresh
// store: the root package's tests prove the runtime, dispatcher and recovery
// over both stores without copying a test.
func eachStore(t *testing.T, f func(t *testing.T, store turnframe.Store)) {
	t.Helper()
	t.Run("memstore", func(t *testing.T) {
		store := memstore.New()
		t.Cleanup(func() { store.Close() })
		f(t, store)
	})
	t.Run("sqlitestore", func(t *testing.T) {
		store, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "turnframe.db"))
		if err != nil {
			t.Fatalf("open sqlitestore: %v", err)
		}
		t.Cleanup(func() { store.Close() })
		f(t, store)
	})
}
