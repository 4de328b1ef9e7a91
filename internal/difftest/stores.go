package difftest

import (
	"math/rand/v2"
	"testing"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/memstore"
)

// Target is the store a differential run compares with memstore.
type Target struct {
	// Name names the store in failure messages ("sqlitestore").
	Name string
	// Open returns a fresh, empty store of its own whose event and outbox
	// ids come from ids, closed by the caller (the run closes it, and then
	// expects ErrClosed from it); it fails t when it cannot.
	Open func(t testing.TB, ids *turnframe.IDGenerator) turnframe.Store
}

// idSeed makes both stores draw the same ids: each gets its own generator
// over the same deterministic entropy, so equal calls give equal ids (the
// comparison maps ids anyway, see world.norm).
var idSeed = [32]byte{7, 7, 7}

// sameIDs returns a fresh generator over idSeed.
func sameIDs() *turnframe.IDGenerator { return turnframe.NewIDGeneratorFrom(rand.NewChaCha8(idSeed)) }

func openWorlds(t testing.TB, target Target) []*world {
	t.Helper()
	mem := memstore.New(memstore.WithIDGenerator(sameIDs()))
	other := target.Open(t, sameIDs())
	t.Cleanup(func() { mem.Close(); other.Close() })
	return []*world{
		{name: "memstore", store: mem, tokens: map[string]int{}},
		{name: target.Name, store: other, tokens: map[string]int{}},
	}
}

// Run decodes in into operations, runs them on memstore and on a fresh
// store of target, and fails t on the first result, error class or final
// state on which they disagree (FuzzStoresAgree's body).
func Run(t testing.TB, target Target, in []byte) {
	t.Helper()
	newRunner(t, in, openWorlds(t, target)).run()
}
