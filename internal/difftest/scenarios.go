package difftest

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/matryer/is"

	"github.com/turnframe/turnframe"
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

// Every slot's turn is received before the first op (runner.run), so a
// begin of the slot's turn is ErrConflict and "fresh" begins (c&0x04) start
// the slot's next turn.

// happyPath: a turn planned with two commands, both run and committed with
// events and outbox rows (one ordered pair, one delayed), then claimed under
// leases, extended, settled every way, expired before and at their end
// (outcome unknown) and resent, released by force, resolved, exhausted and
// requeued, pruned and read.
var happyPath = script(
	op(1, 0, 0, 0x0c, 1, 0x00, 0x01),                 // slot 0: a fresh turn planning k0, k1
	op(1, 20, 0, 0x00, 0x92, 6),                      // run k0: commit, two rows (o1 delayed 180 ms, o2); advance skipped (k1 pending)
	op(1, 4, 0, 0x90, 0x00, 0x80, 0, 2),              // take k1 (prior seen, 20 ms lease), advancing to executing
	op(1, 5, 0, 0x00, 0x00, 1, 1, 0x00, 0x21),        // commit k1 by its attempt: one event, one row; advance to committed
	op(1, 11, 0, 3, 0x00, 6),                         // w1 claims up to 16 under 1 s leases: k0~2, k1
	op(1, 24, 0, 0x01, 0, 7),                         // extend claim 1 (k1) to an hour
	op(1, 13, 0x00, 0x00, 0x00),                      // complete claim 0
	op(1, 14, 1, 0x01, 0x01, 0x00, 0x00, 0x00, 0x00), // batch: retry claim 1, complete claim 0 again (lost)
	op(63, 11, 1, 3, 0x81, 2),                        // w2 claims 645 ms ahead under 20 ms leases: k0~1, k1
	op(1, 15, 0x00),                                  // expire a microsecond before those leases end: none
	op(1, 15, 0x01),                                  // expire at their end: both outcome unknown
	op(1, 16, 0x00, 0x03, 0x00),                      // resolve the first (k0~1): resend
	op(1, 16, 0x00, 0x03, 0x00),                      // and the other (k1)
	op(1, 11, 2, 3, 0x81, 7),                         // w3 claims them again, for an hour
	op(1, 25, 0x00, 0x00),                            // force-release row 0 (k0~1), its lease live
	op(1, 13, 0x05, 0x03, 0x00),                      // mark claim 5 (k1, w3) unknown
	op(1, 16, 0x00, 0x01, 0x00),                      // resolve the unknown row completed
	op(63, 18, 0, 8), op(63, 18, 0, 8),               // TurnPhase, twice, 128 ms later: k0~1 is due again
	op(1, 29, 0, 0x02, 0x00),         // claim it, fail it exhausted, requeue it, claim it again
	op(1, 17, 0x00, 0x00),            // prune
	op(1, 18, 0, 0), op(1, 18, 0, 2), // ForTurn, EventsByID
	op(1, 18, 0, 5, 0, 3), op(1, 18, 0, 6, 0x21, 3), op(1, 18, 0, 7, 0), // ListOutbox, ListUnfinishedTurns after a cursor, GetOutbox
	op(1, 28, 0x01), // pages of two
)

// unknownAndReconcile: a command outcome unknown, a delivered turn that
// still holds it, its reconciliation back to pending (a resend) and the run
// that follows; then a resend asked on an abandoned turn, refused; then an
// attempt stranded on an abandoned turn, reconciled only at its lease end.
var unknownAndReconcile = script(
	op(1, 0, 1, 0x0c, 0, 0x02),  // slot 1 (acct-b): a fresh turn planning k2
	op(1, 20, 1, 0x00, 0x01, 6), // run k2: outcome unknown; advance to committed
	op(1, 9, 1, 0x45),           // delivered
	op(1, 18, 1, 6, 0, 3),       // unfinished turns: the delivered one holds an unknown entry
	op(1, 8, 1, 0x00, 0x02, 0),  // reconcile k2 without an attempt: back to pending
	op(1, 18, 1, 6, 0, 3),       // the delivered turn holding a pending entry is listed
	op(1, 20, 1, 0x00, 0x0a, 6), // run it again: commit with one row; advance skipped (delivered)
	op(1, 0, 3, 0x0c, 0, 0x03),  // slot 3: a fresh turn planning k3
	op(1, 27, 3, 0x00, 0x01, 6), // k3 unknown, turn abandoned, resend refused, reconciled committed
	op(1, 18, 3, 6, 0, 3),
	op(1, 0, 4, 0x0c, 0, 0x05),    // slot 4: a fresh turn planning k5
	op(1, 27, 4, 0x00, 0x05, 2),   // k5 taken (20 ms) and left running, turn abandoned; a reconciliation 1 µs before the lease ends: refused
	op(1, 18, 4, 6, 0, 3),         // the abandoned turn holding a stranded attempt is listed
	op(1, 8, 4, 0x00, 0x08, 0x00), // reconciled committed exactly at its lease end: a stranded attempt
)

// adoption: a turn abandoned with one command executing (its lease ended)
// and two never run; a new turn plans them again and adopts all three, runs
// one, and is itself abandoned with a command taken, which the next turn
// adopts exactly when its lease ends.
var adoption = script(
	op(1, 0, 5, 0x0c, 2, 0x04, 0x05, 0x06), // slot 5 (acct-b): a fresh turn planning k4, k5, k6
	op(1, 4, 5, 0x90, 0x00, 0x80, 0, 0),    // take k4 under a 1 µs lease
	op(1, 26, 5, 0x09, 0x00, 0x00),         // abandon; a new turn plans k4, k5, k6 again: all adopted
	op(1, 20, 5, 0x00, 0x02, 6),            // run adopted k4 in the new turn (its ended lease taken over)
	op(1, 26, 5, 0x25, 0x01, 0x00),         // take k5 (1 µs), abandon, plan again at its lease end: adopted
	op(1, 18, 5, 0),                        // ForTurn
	op(1, 28, 0x00),                        // pages of one
)

// conflicts: a begin twice, a key reused for another command, keys the old
// row-key scheme collided on, a bad key, another tenant's turn, phases
// backwards and skipped, every kind of bad write, and bad calls of the
// other methods.
var conflicts = script(
	op(1, 0, 2, 0x00),          // begin the slot's turn again: conflict
	op(1, 0, 2, 0x04),          // a fresh turn for slot 2
	op(1, 0, 2, 0x00),          // and it again: conflict
	op(1, 2, 2, 0, 0x00, 1),    // admit k0, planned
	op(1, 2, 2, 0, 0xee, 0),    // k0 again for another command: conflict
	op(1, 2, 2, 0, 0xc1, 0),    // admit k/1
	op(1, 2, 2, 0, 0xd8, 0),    // admit k~1: invalid
	op(1, 2, 0xe2, 0, 0x00, 0), // another tenant's turn: not found
	op(1, 9, 2, 1),             // back to received: conflict
	op(1, 9, 2, 0x21),          // advance back to received: skipped
	op(1, 10, 2, 12), op(1, 10, 2, 13), op(1, 10, 2, 14), op(1, 10, 2, 16), op(1, 10, 2, 17), op(1, 10, 2, 18),
	op(1, 10, 2, 19), op(1, 10, 2, 20), op(1, 10, 2, 21), op(1, 10, 2, 53), op(1, 10, 2, 85), op(1, 10, 2, 25),
	op(1, 10, 2, 26), op(1, 10, 2, 27), op(1, 10, 2, 28), op(1, 10, 2, 31),
	op(1, 9, 2, 5),    // committed with k0 pending: conflict
	op(1, 9, 2, 0x25), // advance to committed: skipped
	op(1, 9, 2, 0x46), // abandoned
	op(1, 9, 2, 3),    // terminal: conflict
	op(1, 31, 0, 0), op(1, 31, 1, 1), op(1, 31, 2, 0), op(1, 31, 3, 5), op(1, 31, 4, 0), op(1, 31, 5, 6),
	op(1, 31, 6, 3), op(1, 31, 7, 0), op(1, 31, 8, 7), op(1, 31, 9, 1), op(1, 31, 10, 5), op(1, 31, 11, 0),
	op(1, 31, 12, 6), op(1, 31, 13, 2),
)

// oldKeySchemeCollision: command "k" commits two rows and command "k/1" one,
// in one account: the first scheme keyed all three "k/1", "k/2", "k/1".
var oldKeySchemeCollision = script(
	op(1, 0, 0, 0x0c, 1, 0xc0, 0xc1), // slot 0: a fresh turn planning k and k/1
	op(1, 20, 0, 0x00, 0x12, 6),      // run k: commit with two rows (k~1, k~2)
	op(1, 20, 0, 0x00, 0x0a, 6),      // run k/1: commit with one row (k/1)
	op(1, 11, 0, 3, 0x00, 6),         // claim all three
)

// Seeds returns the seed corpus of FuzzStoresAgree: the hand-written
// scenarios, their concatenation, an empty input and nine random ones.
func Seeds() [][]byte {
	seeds := [][]byte{happyPath, unknownAndReconcile, adoption, conflicts, oldKeySchemeCollision,
		script(happyPath, conflicts, adoption, unknownAndReconcile), {}}
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

// Scripted runs the hand-written seeds on memstore and target, each as a
// subtest named after its scenario, so a failure says which one broke.
func Scripted(t *testing.T, target Target) {
	for name, in := range map[string][]byte{"HappyPath": happyPath, "UnknownAndReconcile": unknownAndReconcile,
		"Adoption": adoption, "Conflicts": conflicts, "OldKeySchemeCollision": oldKeySchemeCollision} {
		t.Run(name, func(t *testing.T) { Run(t, target, in) })
	}
}

// DeliveredTurnWithPendingEntryListedAlike is the minimised divergence
// random input random-1795990136567981299 found (under the first decoder;
// the file stays as a seed): a delivered turn whose unknown command was
// reconciled back to Pending. Since de1c111 memstore lists it as unfinished
// (so recovery resumes it); sqlitestore's ListUnfinishedTurns did not, when
// this test was written. Both stores must list it.
func DeliveredTurnWithPendingEntryListedAlike(t *testing.T, target Target) {
	r := newRunner(t, script(
		op(1, 0, 1, 0x0c, 0, 0x02), // slot 1 (acct-b): a fresh turn planning k2
		op(1, 20, 1, 0, 1, 6),      // run k2: executing, then outcome unknown
		op(1, 9, 1, 0x45),          // delivered
		op(1, 8, 1, 0, 2, 0),       // reconcile k2 back to pending (a resend)
		op(1, 18, 1, 6, 0, 3),      // list unfinished turns
	), openWorlds(t, target))
	r.afterOps = func() {
		turn := r.slotTurns[1][len(r.slotTurns[1])-1]
		for _, w := range r.worlds {
			is := is.New(t)
			e, err := w.store.ByKey(r.ctx, "acct-b", "k2")
			is.NoErr(err)
			is.Equal(e.Status, turnframe.JournalPending) // resent
			m, err := w.store.TurnPhase(r.ctx, "acct-b", turn)
			is.NoErr(err)
			is.Equal(m.Phase, turnframe.PhaseDelivered)
			ms, err := w.store.ListUnfinishedTurns(r.ctx, turnframe.RecoveryScope{}, 10)
			is.NoErr(err)
			is.True(slices.ContainsFunc(ms, func(m turnframe.TurnPhaseMarker) bool { return m.Turn == turn })) // listed for recovery
		}
	}
	r.run()
}

// RowKeysOfOldSchemeStayDistinct: command "k" enqueues two rows and
// command "k/1" one, in one account. The first scheme keyed them "k/1",
// "k/2" and "k/1"; both stores now hold "k~1", "k~2" and "k/1" (and the
// runner checks after every write that no two rows of an account share a
// key).
func RowKeysOfOldSchemeStayDistinct(t *testing.T, target Target) {
	r := newRunner(t, oldKeySchemeCollision, openWorlds(t, target))
	r.afterOps = func() {
		for _, w := range r.worlds {
			is := is.New(t)
			rows, err := w.store.ListOutbox(r.ctx, turnframe.OutboxFilter{Account: "acct-a", Limit: 10})
			is.NoErr(err)
			var got []string
			for _, row := range rows {
				got = append(got, string(row.Key))
			}
			slices.Sort(got)
			is.Equal(got, []string{"k/1", "k~1", "k~2"}) // three rows, three keys
		}
	}
	r.run()
}
