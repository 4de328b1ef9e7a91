package sqlitestore_test

import (
	"context"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

// unfinishedTurns begins n turns of account in one transaction: each is
// unfinished (PhaseReceived) until it is answered.
func unfinishedTurns(t *testing.T, s *sqlitestore.Store, account turnframe.AccountID, n int) {
	t.Helper()
	ctx := context.Background()
	tx, err := s.BeginTx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		if _, err := s.ApplyTx(ctx, tx, begin(account)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// pageAll pages through the unfinished turns in scope as Recover's sweep
// does (256 at a time), and returns how long the fastest of three passes
// took and how many turns it listed.
func pageAll(t *testing.T, s *sqlitestore.Store, scope turnframe.RecoveryScope) (time.Duration, int) {
	t.Helper()
	best, n := time.Duration(1<<62), 0
	for range 3 {
		start, page := time.Now(), scope
		n = 0
		for {
			m, err := s.ListUnfinishedTurns(context.Background(), page, 256)
			if err != nil {
				t.Fatal(err)
			}
			n += len(m)
			if len(m) < 256 {
				break
			}
			page.After = m[len(m)-1].Turn
		}
		best = min(best, time.Since(start))
	}
	return best, n
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
