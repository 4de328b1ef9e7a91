package sqlitestore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
	"github.com/turnframe/turnframe/storetest"
)

// TestConformance runs the suite every turnframe.Store must pass, each
// subtest on a fresh file. The suite proves semantics, not durability, so it
// runs with synchronous=NORMAL: the same statements, a third of the time
// under -race. The other tests here use the default, FULL.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) turnframe.Store {
		s, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "turnframe.db"), sqlitestore.WithSynchronousNormal())
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		return withAppTable(t, s)
	})
}
