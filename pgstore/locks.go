package pgstore

import (
	"context"
	"hash/fnv"
	"slices"
	"strconv"

	"github.com/turnframe/turnframe"
)

// Advisory locks serialise the writers of something that has no row of its
// own to lock: a case (its next revision is read, then written) and an
// order key (its rows' held marks, and the enqueue order among its rows).
// Each is a transaction-scoped lock (pg_advisory_xact_lock) on a 64-bit
// hash of what it names, released at the commit or rollback. Two names that
// hash alike only serialise more than needed. A transaction takes its locks
// in ascending key order, so two transactions that need the same locks
// never wait for each other in a circle over them.

// lockKind keeps the hashes of a case and of an order key apart.
type lockKind byte

const (
	lockCase  lockKind = 'c'
	lockOrder lockKind = 'o'
)

// lockKey returns the advisory lock key of (kind, account, name): an FNV-1a
// hash of the three, each string prefixed by its length so that no two
// triples share an input.
func lockKey(kind lockKind, account turnframe.AccountID, name string) int64 {
	h := fnv.New64a()
	h.Write([]byte{byte(kind)})
	for _, s := range []string{string(account), name} {
		h.Write(strconv.AppendInt(nil, int64(len(s)), 10))
		h.Write([]byte{':'})
		h.Write([]byte(s))
	}
	return int64(h.Sum64())
}

// lockAll takes the advisory locks keys, each once, in ascending order. The
// statements are queued (batch.go): the locks are held before the next
// statement the transaction sends runs.
func lockAll(ctx context.Context, tx *wtx, keys []int64) error {
	keys = slices.Clone(keys)
	slices.Sort(keys)
	keys = slices.Compact(keys)
	for _, k := range keys {
		tx.queue(nil, `SELECT pg_advisory_xact_lock($1)`, k)
	}
	return nil
}

// lockCases takes the locks of the cases of account that w's events and
// expectations name.
func lockCases(ctx context.Context, tx *wtx, w turnframe.Write) error {
	var keys []int64
	for _, ev := range w.Events {
		keys = append(keys, lockKey(lockCase, w.Account, string(ev.Case)))
	}
	for c := range w.Expect {
		keys = append(keys, lockKey(lockCase, w.Account, string(c)))
	}
	return lockAll(ctx, tx, keys)
}
