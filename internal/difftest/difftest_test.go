package difftest_test

import (
	"context"
	"testing"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/internal/difftest"
	"github.com/turnframe/turnframe/internal/sqlitefile"
	"github.com/turnframe/turnframe/sqlitestore"
)

// sqlite is the store compared with memstore here: a file of its own in
// the test's temporary directory.
var sqlite = difftest.Target{
	Name: "sqlitestore",
	Open: func(t testing.TB, ids *turnframe.IDGenerator) turnframe.Store {
		t.Helper()
		s, err := sqlitestore.Open(context.Background(), sqlitefile.Path(t),
			sqlitestore.WithIDGenerator(ids),
			sqlitestore.WithSynchronousNormal()) // durability is not what is compared here
		if err != nil {
			t.Fatalf("open sqlitestore: %v", err)
		}
		return s
	},
}

// FuzzStoresAgree decodes its input into operations, runs them on memstore
// and sqlitestore, and fails when a result, an error class or the final
// state differ.
func FuzzStoresAgree(f *testing.F) {
	for _, s := range difftest.Seeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		difftest.Run(t, sqlite, in)
	})
}

// TestScriptedSeeds runs the hand-written seeds by name, so a failure says
// which scenario broke.
func TestScriptedSeeds(t *testing.T) { difftest.Scripted(t, sqlite) }

// TestStoresAgreeRandom runs FuzzStoresAgree's body on random inputs (50 by
// default; see difftest.Random for the DIFFTEST_* variables).
func TestStoresAgreeRandom(t *testing.T) { difftest.Random(t, sqlite, 50) }

// TestDeliveredTurnWithPendingEntryListedAlike: see
// difftest.DeliveredTurnWithPendingEntryListedAlike.
func TestDeliveredTurnWithPendingEntryListedAlike(t *testing.T) {
	difftest.DeliveredTurnWithPendingEntryListedAlike(t, sqlite)
}

// TestRowKeysOfOldSchemeStayDistinct: see
// difftest.RowKeysOfOldSchemeStayDistinct.
func TestRowKeysOfOldSchemeStayDistinct(t *testing.T) {
	difftest.RowKeysOfOldSchemeStayDistinct(t, sqlite)
}

// TestDecoderReachesRealFlows: see difftest.DecoderReachesRealFlows.
func TestDecoderReachesRealFlows(t *testing.T) { difftest.DecoderReachesRealFlows(t, sqlite) }
