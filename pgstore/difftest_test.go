package pgstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/internal/difftest"
	"github.com/turnframe/turnframe/pgstore"
	"github.com/turnframe/turnframe/pgstore/pgtest"
)

// postgres is the store difftest compares with memstore here: a pgstore on
// a fresh schema of its own per input. Its ids come from the generator the
// run gives, so both stores draw the same ones. It runs on CallerClock, as
// the conformance suite does: the run's clock is a fixed one stepped by
// each operation, and DatabaseClock would move every time it reads back by
// the real clocks' drift between calls (the crash harness runs the default,
// DatabaseClock, on real clocks).
var postgres = difftest.Target{
	Name: "pgstore",
	Open: func(t testing.TB, ids *turnframe.IDGenerator) turnframe.Store {
		t.Helper()
		s, err := pgstore.Open(context.Background(), pgtest.Schema(t), pgstore.WithIDGenerator(ids), pgstore.WithClock(pgstore.CallerClock))
		if err != nil {
			t.Fatalf("open pgstore: %v", err)
		}
		return s
	},
}

// TestDiffScriptedSeeds runs difftest's hand-written scenarios on memstore
// and pgstore: every result, error class and the final state must agree.
func TestDiffScriptedSeeds(t *testing.T) { difftest.Scripted(t, postgres) }

// TestDiffStoresAgreeRandom runs random operation sequences on memstore and
// pgstore (40 inputs by default, 10 under -race or -short; DIFFTEST_RUNS,
// DIFFTEST_SEED, DIFFTEST_INPUT and DIFFTEST_KEEPGOING as in
// internal/difftest).
func TestDiffStoresAgreeRandom(t *testing.T) { difftest.Random(t, postgres, 40) }

// TestDiffSeedCorpus runs FuzzStoresAgree's seed corpus (internal/difftest)
// on memstore and pgstore.
func TestDiffSeedCorpus(t *testing.T) {
	for i, in := range difftest.Seeds() {
		t.Run(fmt.Sprintf("seed%d", i), func(t *testing.T) { difftest.Run(t, postgres, in) })
	}
}

// TestDiffDeliveredTurnWithPendingEntryListedAlike: see
// difftest.DeliveredTurnWithPendingEntryListedAlike.
func TestDiffDeliveredTurnWithPendingEntryListedAlike(t *testing.T) {
	difftest.DeliveredTurnWithPendingEntryListedAlike(t, postgres)
}

// TestDiffRowKeysOfOldSchemeStayDistinct: see
// difftest.RowKeysOfOldSchemeStayDistinct.
func TestDiffRowKeysOfOldSchemeStayDistinct(t *testing.T) {
	difftest.RowKeysOfOldSchemeStayDistinct(t, postgres)
}
