package difftest_test

import (
	"math/rand/v2"
	"testing"
)

// op encodes one operation for the decoder: a clock byte, the opcode, then
// its parameters (see runner.step and the op* methods).
func op(tick, code byte, params ...byte) []byte { return append([]byte{tick, code}, params...) }

func script(ops ...[]byte) []byte {
	var b []byte
	for _, o := range ops {
		b = append(b, o...)
	}
	return b
}

// happyPath: a turn planned with two commands, both executed and
// committed with events and outbox rows (one ordered pair, one delayed),
// then claimed, settled every way, resolved, released, pruned and read.
var happyPath = script(
	op(1, 0, 0, 0x11, 1, 0x00, 0x09),       // begin slot 0 and plan k0/c0, k1/c1
	op(1, 4, 0, 0, 1),                      // k0 executing, phase executing
	op(1, 5, 0, 0, 0, 1, 2, 0x02, 0x03, 0), // commit k0: one event, two rows of order key o1
	op(1, 4, 0, 1, 0),                      // k1 executing
	op(1, 5, 0, 1, 0, 2, 1, 0x45, 2),       // commit k1: two events, a delayed row; phase committed
	op(1, 11, 0, 3, 0),                     // w1 claims up to 16
	op(1, 13, 0, 0),                        // complete claim 0
	op(1, 14, 1, 1, 1, 0, 0),               // batch: retry claim 1, complete claim 0 again (lost)
	op(63, 11, 1, 3, 0xff),                 // w2 claims ahead
	op(1, 13, 1, 3),                        // claim 1 (retried, its claim lost) marked unknown: lost
	op(1, 13, 2, 3),                        // mark claim 2 unknown
	op(1, 16, 2, 1),                        // resolve row 2 completed
	op(1, 15, 0),                           // release expired claims
	op(1, 17, 0),                           // prune
	op(1, 18, 0, 0), op(1, 18, 0, 2), op(1, 18, 0, 5, 0, 3), op(1, 18, 0, 6, 0, 3), op(1, 18, 0, 7, 0),
)

// unknownAndReconcile: a command outcome unknown, a delivered turn that
// still holds it, and its reconciliation.
var unknownAndReconcile = script(
	op(1, 0, 1, 0x10, 0, 0x02),       // begin slot 1 (acct-b), plan k2/c0
	op(1, 4, 1, 0, 1),                // executing
	op(1, 7, 1, 0, 1),                // outcome unknown
	op(1, 9, 1, 6),                   // delivered
	op(1, 18, 1, 6, 0, 3),            // unfinished turns: the delivered one holds an unknown entry
	op(1, 8, 1, 0, 2),                // reconcile: back to pending
	op(1, 4, 1, 0, 0),                // executing again
	op(1, 5, 1, 0, 0, 0, 1, 0x80, 0), // commit with one row due later
	op(1, 18, 1, 6, 3, 3),
)

// conflicts: a key reused for another command, a begin twice, phases
// backwards, claims by several workers with forged fences.
var conflicts = script(
	op(1, 0, 2, 0x00),
	op(1, 0, 2, 0x00),          // begin twice
	op(1, 2, 2, 0, 0x00, 1),    // admit k0/c0/book, planned
	op(1, 2, 2, 0, 0x08, 0),    // k0 again for c1: conflict
	op(1, 2, 0x82, 0, 0x00, 0), // other tenant's turn: not found
	op(1, 9, 2, 1),             // back to received: conflict
	op(1, 10, 2, 4), op(1, 10, 2, 6), op(1, 10, 2, 9), op(1, 10, 2, 10), op(1, 10, 2, 11),
	op(1, 9, 2, 5), // committed with k0 pending: conflict
	op(1, 9, 2, 7), // abandoned
	op(1, 9, 2, 3), // terminal: conflict
)

func seedInputs() [][]byte {
	seeds := [][]byte{happyPath, unknownAndReconcile, conflicts, script(happyPath, conflicts, unknownAndReconcile), {}}
	for i := range 9 {
		rng := rand.New(rand.NewPCG(uint64(i), 42))
		b := make([]byte, 64+i*150)
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		seeds = append(seeds, b)
	}
	return seeds
}

// FuzzStoresAgree decodes its input into operations, runs them on memstore
// and sqlitestore, and fails when a result, an error class or the final
// state differ.
func FuzzStoresAgree(f *testing.F) {
	for _, s := range seedInputs() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		runOps(t, in)
	})
}

// TestScriptedSeeds runs the hand-written seeds by name, so a failure says
// which scenario broke.
func TestScriptedSeeds(t *testing.T) {
	for name, in := range map[string][]byte{"HappyPath": happyPath, "UnknownAndReconcile": unknownAndReconcile, "Conflicts": conflicts} {
		t.Run(name, func(t *testing.T) { runOps(t, in) })
	}
}

// TestDeliveredTurnWithPendingEntryListedAlike is the minimised divergence
// random input random-1795990136567981299 found: a delivered turn whose
// unknown command was reconciled back to Pending. Since de1c111 memstore
// lists it as unfinished (so recovery resumes it); sqlitestore's
// ListUnfinishedTurns did not, when this test was written.
func TestDeliveredTurnWithPendingEntryListedAlike(t *testing.T) {
	runOps(t, script(
		op(1, 0, 1, 0x08, 0, 0x02), // begin slot 1 (acct-b) and admit k2
		op(1, 20, 1, 0, 1),         // run k2: executing, then outcome unknown
		op(1, 9, 1, 0x45),          // delivered
		op(1, 8, 1, 0, 2),          // reconcile k2 back to pending (a resend)
		op(1, 18, 1, 6, 0, 3),      // list unfinished turns
	))
}
