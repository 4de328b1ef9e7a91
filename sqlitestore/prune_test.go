package sqlitestore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
	"github.com/turnframe/turnframe/storekit"
)

// finishedRows enqueues n rows of size payload bytes each, claims them,
// and settles them Completed, the i-th at finish(i); it returns their ids
// in enqueue order.
func finishedRows(t *testing.T, s *sqlitestore.Store, n, size int, finish func(i int) time.Time) []turnframe.OutboxID {
	t.Helper()
	ctx := context.Background()
	payload := make([]byte, size)
	const per = 50
	for i := 0; i < n; i += per {
		msgs := make([]turnframe.OutboxMessage, min(per, n-i))
		for j := range msgs {
			msgs[j] = turnframe.OutboxMessage{Destination: "d", Payload: payload}
		}
		mustCommit(t, s, "acme", turnframe.IdempotencyKey(fmt.Sprintf("k%d", i)), msgs...)
	}
	claims, err := s.ClaimDue(ctx, t0.Add(time.Second), n, "w", lease)
	if err != nil || len(claims) != n {
		t.Fatalf("claim: %d rows, %v", len(claims), err)
	}
	sets := make([]turnframe.OutboxSettlement, n)
	ids := make([]turnframe.OutboxID, n)
	for i, c := range claims {
		sets[i] = turnframe.OutboxSettlement{Claim: c, To: turnframe.OutboxCompleted, Now: finish(i)}
		ids[i] = c.ID
	}
	if _, err := s.Settle(ctx, sets); err != nil {
		t.Fatal(err)
	}
	return ids
}

// at returns a finish function that finishes every row at t.
func at(t time.Time) func(int) time.Time { return func(int) time.Time { return t } }

// Prune returns a count: it reads no payload, so what it allocates does
// not grow with the bytes it deletes. (It once read every deleted row,
// payload and all, into one slice in one transaction: 37 MiB allocated to
// prune 100 rows of 128 KiB.)
func TestPruneMemoryDoesNotGrowWithThePayloadsPruned(t *testing.T) {
	ctx := context.Background()
	const n = 100
	alloc := map[int]uint64{}
	for _, size := range []int{1 << 10, 128 << 10} {
		s := mustOpen(t)
		finishedRows(t, s, n, size, at(t0.Add(3*time.Second)))
		runtime.GC()
		var a, b runtime.MemStats
		runtime.ReadMemStats(&a)
		pruned, err := s.Prune(ctx, t0.Add(time.Hour))
		runtime.ReadMemStats(&b)
		if err != nil || pruned != n {
			t.Fatalf("prune: %d, %v", pruned, err)
		}
		alloc[size] = b.TotalAlloc - a.TotalAlloc
		t.Logf("prune of %d rows of %d KiB: allocated %d KiB", n, size>>10, alloc[size]>>10)
	}
	is := is.New(t)
	// 12.4 MiB more payload pruned; not even 1 MiB more allocated.
	is.True(alloc[128<<10] < alloc[1<<10]+1<<20) // memory follows the rows, not their payload bytes
}

// Prune deletes in batches of storekit.PruneBatch rows, oldest first, each
// its own transaction: the application's writes go in between, and an
// error in one batch keeps the batches before it pruned, counted, and
// rolls back only its own. A row that cannot be read stands in for the
// error here (a busy file or a cancelled context in the field).
func TestPruneCommitsEachBatchOnItsOwn(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	path := t.TempDir() + "/turnframe.db"
	s := mustOpenPath(t, path)
	early, late, latest := t0.Add(2*time.Second), t0.Add(3*time.Second), t0.Add(4*time.Second)
	// A batch finished early, a batch late, and half a batch latest: each
	// batch, oldest first, is the rows of one finish time, whatever order
	// the store takes rows of the same time in.
	total := storekit.PruneBatch*2 + storekit.PruneBatch/2
	ids := finishedRows(t, s, total, 16, func(i int) time.Time {
		switch {
		case i < storekit.PruneBatch:
			return early
		case i < 2*storekit.PruneBatch:
			return late
		}
		return latest
	})
	// The last row of the next batch cannot be read back.
	bad := ids[2*storekit.PruneBatch-1]
	db, err := sql.Open("sqlite", "file:"+path)
	is.NoErr(err) // open the file beside the store
	defer db.Close()
	_, err = db.ExecContext(ctx, `UPDATE outbox SET id = ? WHERE id = ?`, strings.Repeat("!", 26), bad.String())
	is.NoErr(err) // spoil one row's id
	kept := ids[storekit.PruneBatch]
	keptHistory, err := s.History(ctx, turnframe.OutboxSubject("acme", kept), 0, 100)
	is.NoErr(err)                 // history of a row of the failing batch
	is.True(len(keptHistory) > 0) // it has some

	n, err := s.Prune(ctx, t0.Add(time.Hour))
	is.True(err != nil)              // the second batch fails
	is.Equal(n, storekit.PruneBatch) // the first batch stays pruned, and counted
	for _, id := range ids[:storekit.PruneBatch] {
		_, err := s.GetOutbox(ctx, id)
		is.True(errors.Is(err, turnframe.ErrNotFound)) // a row of the first batch is gone
	}
	_, err = s.GetOutbox(ctx, kept)
	is.NoErr(err) // a row of the failed batch is kept
	h, err := s.History(ctx, turnframe.OutboxSubject("acme", kept), 0, 100)
	is.NoErr(err)            // its history
	is.Equal(h, keptHistory) // kept whole
	_, err = s.GetOutbox(ctx, ids[total-1])
	is.NoErr(err) // and a row after it was never reached

	// The row mended, a prune again takes the rest.
	_, err = db.ExecContext(ctx, `UPDATE outbox SET id = ? WHERE id = ?`, bad.String(), strings.Repeat("!", 26))
	is.NoErr(err) // mend the row
	n, err = s.Prune(ctx, t0.Add(time.Hour))
	is.NoErr(err)                          // prune the rest
	is.Equal(n, total-storekit.PruneBatch) // every row left
	h, err = s.History(ctx, turnframe.OutboxSubject("acme", kept), 0, 100)
	is.NoErr(err)       // history of a pruned row
	is.Equal(len(h), 0) // gone with it
}
