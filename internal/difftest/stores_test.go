package difftest_test

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/memstore"
	"github.com/turnframe/turnframe/sqlitestore"
)

// idSeed makes both stores draw the same ids: each gets its own generator
// over the same deterministic entropy, so equal calls give equal ids (the
// comparison maps ids anyway, see world.norm).
var idSeed = [32]byte{7, 7, 7}

func openWorlds(t testing.TB) []*world {
	t.Helper()
	mem := memstore.New(memstore.WithIDGenerator(turnframe.NewIDGeneratorFrom(rand.NewChaCha8(idSeed))))
	sql, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "diff.db"),
		sqlitestore.WithIDGenerator(turnframe.NewIDGeneratorFrom(rand.NewChaCha8(idSeed))),
		sqlitestore.WithSynchronousNormal()) // durability is not what is compared here
	if err != nil {
		t.Fatalf("open sqlitestore: %v", err)
	}
	t.Cleanup(func() { mem.Close(); sql.Close() })
	return []*world{
		{name: "memstore", store: mem, tokens: map[string]int{}},
		{name: "sqlitestore", store: sql, tokens: map[string]int{}},
	}
}

// runOps decodes in and runs it on both stores.
func runOps(t testing.TB, in []byte) {
	t.Helper()
	newRunner(t, in, openWorlds(t)).run()
}
