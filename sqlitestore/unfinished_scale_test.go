package sqlitestore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
	"modernc.org/sqlite"
)

// unfinishedTurns writes n unfinished turns of account in one statement
// per table on the store's transaction: the turns a Begin writes, without
// its Writes (minutes under -race). Turn x (from 1) is listed by the
// listing's part x % 4: received (0), or delivered holding an
// outcome_unknown (1), a pending (2) or an awaiting_approval entry (3).
// Their ids and conversations are valid ULIDs, in insertion order:
// unfinishedTurnID(x).
func unfinishedTurns(t *testing.T, s *sqlitestore.Store, account turnframe.AccountID, n int) {
	t.Helper()
	ctx := context.Background()
	tx, err := s.BeginTx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	at := t0.UnixMicro()
	if _, err := tx.ExecContext(ctx, `WITH RECURSIVE i(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM i WHERE x < ?)
		INSERT INTO turns (id, account, conversation, text, phase, received_at, updated_at)
		SELECT printf('01JB%022d', x), ?, printf('01JC%022d', x), 'book a seat',
			CASE x % 4 WHEN 0 THEN 'received' ELSE 'delivered' END, ?, ? FROM i`,
		n, string(account), at, at); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `WITH RECURSIVE i(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM i WHERE x < ?)
		INSERT INTO journal (account, key, turn, case_key, name, status, attempt, attempts, event_ids, code, remote_ref, admitted_at, updated_at)
		SELECT ?, printf('k%d', x), printf('01JB%022d', x), 'seat', 'book',
			CASE x % 4 WHEN 1 THEN 'outcome_unknown' WHEN 2 THEN 'pending' ELSE 'awaiting_approval' END,
			'', 0, '[]', '', '', ?, ? FROM i WHERE x % 4 <> 0`,
		n, string(account), at, at); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// unfinishedTurnID is the id unfinishedTurns gives turn x.
func unfinishedTurnID(t *testing.T, x int) turnframe.TurnID {
	t.Helper()
	id, err := turnframe.ParseTurnID(fmt.Sprintf("01JB%022d", x))
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// pagesRead runs ListUnfinishedTurns's statement for one page of scope on
// one read connection, as ListUnfinishedTurns binds it, and returns how
// many database pages it fetched (sqlite3_db_status's cache hits plus
// misses: every page the b-trees asked the pager for, cached or not, so a
// count that follows the rows a statement visits and not the machine) and
// how many turns it listed. It runs the statement once first, so the count
// leaves out the connection's reading of the schema.
func pagesRead(t *testing.T, s *sqlitestore.Store, scope turnframe.RecoveryScope, limit int) (pages, listed int) {
	t.Helper()
	ctx := context.Background()
	conn, err := s.ReadDB().Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fetched := func() int {
		var n int
		err := conn.Raw(func(dc any) error {
			for _, op := range []sqlite.DBStatusOp{sqlite.DBStatusCacheHit, sqlite.DBStatusCacheMiss} {
				cur, _, err := dc.(sqlite.DBStatus).Status(op, false)
				if err != nil {
					return err
				}
				n += cur
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	after, before := "", int64(0)
	if !scope.After.IsZero() {
		after = scope.After.String()
	}
	if !scope.UpdatedBefore.IsZero() {
		before = scope.UpdatedBefore.UnixMicro()
	}
	run := func() int {
		rows, err := conn.QueryContext(ctx, sqlitestore.UnfinishedSQL, after, limit, string(scope.Account), before)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		n := 0
		for rows.Next() {
			n++
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return n
	}
	run()
	start := fetched()
	listed = run()
	return fetched() - start, listed
}

// pageAll pages through the unfinished turns in scope as Recover's sweep
// does (256 at a time), and returns the turns it listed, in order.
func pageAll(t *testing.T, s *sqlitestore.Store, scope turnframe.RecoveryScope) []turnframe.TurnID {
	t.Helper()
	var listed []turnframe.TurnID
	for {
		m, err := s.ListUnfinishedTurns(context.Background(), scope, 256)
		if err != nil {
			t.Fatal(err)
		}
		for _, mk := range m {
			listed = append(listed, mk.Turn)
		}
		if len(m) < 256 {
			return listed
		}
		scope.After = m[len(m)-1].Turn
	}
}

// A page of unfinished turns reads the turns it lists, not every
// unfinished turn after the cursor (DESIGN.md, Recovery: Recover pages
// through them, twice a pass), so paging through N turns costs N pages of
// one cost, not N²: each of the listing's four parts stops at the limit
// (sqlitestore's unfinishedSQL). The cost is counted in database pages
// fetched, which a given file and statement fix, never timed: a first page
// with 7,936 unfinished turns after it reads what a page with 1,792 after
// it reads, where each part still has more than a page left to walk. They
// differ only by where their walks cross from one b-tree page to the next
// (by two pages in 3,750, so a tenth is slack enough); a part that walked
// every turn after the cursor reads a third as many again or more on the
// first page, for each turn it passes is looked up: a journal part's for
// its phase, and in a scope with an account or a time, every part's for
// those. (Unscoped, the turns part reads only its index, a page per
// hundred turns it passes: the second scope is the one that shows it
// stopping.)
func TestAPageOfUnfinishedTurnsReadsTheSamePagesWhateverFollowsIt(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 8,192 turns")
	}
	const n = 8192
	s := mustOpen(t)
	unfinishedTurns(t, s, "acme", n)
	is := is.New(t)
	listed := pageAll(t, s, turnframe.RecoveryScope{})
	is.Equal(len(listed), n) // every unfinished turn, each of the four parts'
	for i, id := range listed {
		if id != unfinishedTurnID(t, i+1) {
			t.Fatalf("listed[%d] = %v, want %v: every unfinished turn, once, in id order", i, id, unfinishedTurnID(t, i+1))
		}
	}

	scopes := []struct {
		name  string
		scope turnframe.RecoveryScope
	}{
		// Recovery.Run's first pass.
		{name: "Everything", scope: turnframe.RecoveryScope{}},
		// Its later passes, of one account.
		{name: "AccountUpdatedBefore", scope: turnframe.RecoveryScope{Account: "acme", UpdatedBefore: t0.Add(time.Hour)}},
	}
	for _, sc := range scopes {
		t.Run(sc.name, func(t *testing.T) {
			is := is.New(t)
			page, err := s.ListUnfinishedTurns(context.Background(), sc.scope, 256)
			is.NoErr(err)
			is.Equal(len(page), 256)                           // a full first page
			is.Equal(page[0].Turn, unfinishedTurnID(t, 1))     // from the first turn
			is.Equal(page[255].Turn, unfinishedTurnID(t, 256)) // to the 256th

			first, firstListed := pagesRead(t, s, sc.scope, 256)
			late := sc.scope
			late.After = unfinishedTurnID(t, n-2048)
			later, laterListed := pagesRead(t, s, late, 256)
			is.Equal(firstListed, 256) // a full first page
			is.Equal(laterListed, 256) // a full later page
			t.Logf("pages fetched for a page of 256 with 7,936 unfinished turns after it: %d; with 1,792: %d", first, later)
			is.True(first <= later+later/10) // the turns after the page are not read
		})
	}
}
