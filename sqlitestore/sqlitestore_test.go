package sqlitestore_test

import (
	"context"
	"testing"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/internal/sqlitefile"
	"github.com/turnframe/turnframe/sqlitestore"
	"github.com/turnframe/turnframe/storetest"
)

// TestConformance runs the suite every turnframe.Store must pass, each
// subtest on a fresh file: a copy of one the package's TestMain migrated
// (sqlitefile), as the migrations have tests of their own. The suite proves semantics, not durability, so it
// runs with synchronous=NORMAL: the same statements, a third of the time
// under -race. The other tests here use the default, FULL.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) turnframe.Store {
		s, err := sqlitestore.Open(context.Background(), sqlitefile.Path(t), sqlitestore.WithSynchronousNormal())
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		return withAppTable(t, s)
	})
}
