package sqlitestore_test

import (
	"context"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

// unfinishedTurns writes n turns of account, each received and so
// unfinished, in one statement on the store's transaction: the turns a
// Begin writes, without its 22,500 Writes (90 s under -race). Their ids
// and conversations are valid ULIDs, in insertion order.
func unfinishedTurns(t *testing.T, s *sqlitestore.Store, account turnframe.AccountID, n int) {
	t.Helper()
	ctx := context.Background()
	tx, err := s.BeginTx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	at := t0.UnixMicro()
	_, err = tx.ExecContext(ctx, `WITH RECURSIVE i(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM i WHERE x < ?)
		INSERT INTO turns (id, account, conversation, text, phase, received_at, updated_at)
		SELECT printf('01JB%022d', x), ?, printf('01JC%022d', x), 'book a seat', 'received', ?, ? FROM i`,
		n, string(account), at, at)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// pageAll pages through the unfinished turns in scope as Recover's sweep
// does (256 at a time), and returns how long that took and how many turns
// it listed.
func pageAll(t *testing.T, s *sqlitestore.Store, scope turnframe.RecoveryScope) (time.Duration, int) {
	t.Helper()
	start, n := time.Now(), 0
	for {
		m, err := s.ListUnfinishedTurns(context.Background(), scope, 256)
		if err != nil {
			t.Fatal(err)
		}
		n += len(m)
		if len(m) < 256 {
			return time.Since(start), n
		}
		scope.After = m[len(m)-1].Turn
	}
}

// A page of unfinished turns reads the turns it lists, not every
// unfinished turn after the cursor (DESIGN.md, Recovery: Recover pages
// through them, twice a pass), so paging through N turns costs N pages of
// one cost, not N²: a first page costs about as much with 2,500 or 20,000
// unfinished turns behind it (it cost 8× as much when every page read all
// of them). The bound is generous: it tells constant from linear, not fast
// from slow. Paging through every turn is timed for the log only: caches
// and a shared machine make a ratio of two full passes noisy.
func TestAPageOfUnfinishedTurnsCostsTheSameWhateverFollowsIt(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 22,500 turns")
	}
	is := is.New(t)
	small, large := mustOpen(t), mustOpen(t)
	unfinishedTurns(t, small, "acme", 2500)
	unfinishedTurns(t, large, "acme", 20000)

	first := func(s *sqlitestore.Store) time.Duration {
		best := time.Duration(1 << 62)
		for range 5 {
			start := time.Now()
			m, err := s.ListUnfinishedTurns(context.Background(), turnframe.RecoveryScope{}, 256)
			best = min(best, time.Since(start))
			is.NoErr(err)
			is.Equal(len(m), 256)
		}
		return best
	}
	fs, fl := first(small), first(large)
	t.Logf("a first page of 256 beside 2,500 unfinished turns: %v; beside 20,000: %v (%.1f×)", fs, fl, float64(fl)/float64(fs))
	is.True(fl < 4*fs+time.Millisecond) // the turns after the page are not read

	ds, ns := pageAll(t, small, turnframe.RecoveryScope{})
	dl, nl := pageAll(t, large, turnframe.RecoveryScope{})
	is.Equal(ns, 2500)  // every unfinished turn, once
	is.Equal(nl, 20000) // every unfinished turn, once
	t.Logf("paging 2,500 unfinished turns: %v; 20,000: %v (%.1f×)", ds, dl, float64(dl)/float64(ds))
}
