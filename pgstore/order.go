package pgstore

import (
	"context"

	"github.com/turnframe/turnframe"
)

// The held mark keeps a Pending row that an earlier row of its account and
// order key holds back out of the claim's index (outbox_due). It is an index
// of the rule, not the rule: the claim still applies turnframe's rule
// through its probe, so a mark missing where it belongs costs time, never
// order. A mark left where it does not belong would keep a due row back for
// good, so every statement that changes marks runs under the key's advisory
// lock, taken before it reads (orderLocks): with concurrent writers, the
// enqueue of a row and the settlement that lets the key go could otherwise
// each miss the other, and leave the new row held behind nothing.

// holdsSQL is true when an active row of the key ($1 account, $2 order
// key) comes before seq $3.
const activeEarlierSQL = `EXISTS (SELECT 1 FROM outbox AS p
	WHERE p.account = $1 AND p.order_key = $2 AND p.order_key <> '' AND p.seq < $3
	  AND p.status IN ('pending', 'dispatching', 'outcome_unknown', 'needs_intervention'))`

// holdSQL marks a row held when an earlier row of its key is active.
const holdSQL = `UPDATE outbox SET held = ` + activeEarlierSQL + ` WHERE seq = $3`

// letGoSQL clears the mark of the first active row of a key: nothing before
// it holds it back any more.
const letGoSQL = `UPDATE outbox SET held = false WHERE held AND seq = (
	SELECT min(p.seq) FROM outbox AS p
	WHERE p.account = $1 AND p.order_key = $2 AND p.order_key <> ''
	  AND p.status IN ('pending', 'dispatching', 'outcome_unknown', 'needs_intervention'))`

// holdLaterSQL marks every Pending row after a row that became active again.
const holdLaterSQL = `UPDATE outbox SET held = true
	WHERE account = $1 AND order_key = $2 AND order_key <> '' AND seq > $3 AND status = 'pending' AND NOT held`

// orderMoves reports whether the move from before to after changes whether
// the row holds its order key: only such a move changes any mark.
func orderMoves(before, after turnframe.OutboxRecord) bool {
	return after.OrderKey != "" && before.Status.HoldsOrder() != after.Status.HoldsOrder()
}

// orderLocks returns the advisory lock keys of the order keys whose marks
// the moves of rows from before to after change.
func orderLocks(moves ...[2]turnframe.OutboxRecord) []int64 {
	var keys []int64
	for _, m := range moves {
		if orderMoves(m[0], m[1]) {
			keys = append(keys, lockKey(lockOrder, m[1].Account, m[1].OrderKey))
		}
	}
	return keys
}

// keepOrder brings the held marks of r's key up to date after r, stored at
// seq, moved from the status of before to the status of after. The caller
// holds the key's advisory lock (orderLocks). Only a row that starts or
// stops holding its key changes anything: one that stops (completed,
// failed) lets the next one go; one that starts again (a failed row
// requeued) holds back every Pending row after it, and is itself held if an
// earlier row is active. A newly enqueued row is marked by its INSERT.
func keepOrder(ctx context.Context, tx *wtx, seq int64, before, after turnframe.OutboxRecord) error {
	if !orderMoves(before, after) {
		return nil
	}
	account, key := string(after.Account), after.OrderKey
	if !after.Status.HoldsOrder() {
		tx.queue(nil, letGoSQL, account, key)
		return nil
	}
	tx.queue(nil, holdLaterSQL, account, key, seq)
	tx.queue(nil, holdSQL, account, key, seq)
	return nil
}
