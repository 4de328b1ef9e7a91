package sqlitestore

import (
	"context"

	"github.com/turnframe/turnframe"
)

// The held mark keeps a Pending row that an earlier row of its account and
// order key holds back out of the claim's index. It is an index of the rule,
// not the rule: the claim still applies turnframe's rule through its probe.
// Every statement here reads outbox_ordered, the active rows of one key, so
// keeping the mark costs a few index steps per transition, whatever the
// length of the queue.

// activeEarlierSQL is true when an earlier row of the key holds it back. ?1
// account, ?2 order key, ?3 the row's seq.
const activeEarlierSQL = `EXISTS (SELECT 1 FROM outbox AS p INDEXED BY outbox_ordered
	WHERE p.account = ?1 AND p.order_key = ?2 AND p.order_key <> '' AND p.seq < ?3
	  AND p.status IN ('pending', 'dispatching', 'outcome_unknown', 'needs_intervention'))`

// holdSQL marks a row held when an earlier row of its key is active.
const holdSQL = `UPDATE outbox SET held = ` + activeEarlierSQL + ` WHERE seq = ?3`

// letGoSQL clears the mark of the first active row of a key: nothing before
// it holds it back any more.
const letGoSQL = `UPDATE outbox SET held = 0 WHERE held = 1 AND seq = (
	SELECT min(p.seq) FROM outbox AS p INDEXED BY outbox_ordered
	WHERE p.account = ?1 AND p.order_key = ?2 AND p.order_key <> ''
	  AND p.status IN ('pending', 'dispatching', 'outcome_unknown', 'needs_intervention'))`

// holdLaterSQL marks every Pending row after a row that became active again.
const holdLaterSQL = `UPDATE outbox SET held = 1 WHERE seq IN (
	SELECT p.seq FROM outbox AS p INDEXED BY outbox_ordered
	WHERE p.account = ?1 AND p.order_key = ?2 AND p.order_key <> '' AND p.seq > ?3
	  AND p.status IN ('pending', 'dispatching', 'outcome_unknown', 'needs_intervention') AND p.status = 'pending')`

// keepOrder brings the held marks of r's key up to date after r, stored at
// seq, moved from the status of before to the status of after. Only a row
// that starts or stops holding its key changes anything: one that stops
// (completed, failed) lets the next one go; one that starts again (a failed
// row requeued) holds back every Pending row after it, and is itself held
// if an earlier row is active. A newly enqueued row is marked by holdSQL.
func keepOrder(ctx context.Context, tx *wtx, seq int64, before, after turnframe.OutboxRecord) error {
	if after.OrderKey == "" {
		return nil
	}
	was, is := before.Status.HoldsOrder(), after.Status.HoldsOrder()
	args := []any{string(after.Account), after.OrderKey, seq}
	var err error
	switch {
	case was && !is:
		_, err = tx.ExecContext(ctx, letGoSQL, args[:2]...)
	case !was && is:
		if _, err = tx.ExecContext(ctx, holdLaterSQL, args...); err == nil {
			_, err = tx.ExecContext(ctx, holdSQL, args...)
		}
	}
	return translate(ctx, err)
}
