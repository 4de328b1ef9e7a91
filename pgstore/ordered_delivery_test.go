package pgstore_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
	"github.com/turnframe/turnframe/pgstore/pgtest"
)

// base is the tests' clock: every time is base plus an offset.
var base = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// enqueueRows commits one command of account at now that enqueues msgs:
// one Write begins the turn, admits the command and takes it, a second
// commits it with the rows.
func enqueueRows(ctx context.Context, s turnframe.Store, ids *turnframe.IDGenerator, account turnframe.AccountID, key turnframe.IdempotencyKey, now time.Time, msgs ...turnframe.OutboxMessage) error {
	turn, attempt := ids.TurnID(now), ids.AttemptID(now)
	_, err := s.Apply(ctx, turnframe.Write{
		Account: account, Turn: turn, Now: now,
		Begin: &turnframe.StoredTurn{Account: account, ID: turn, Conversation: ids.ConversationID(now), Text: "send"},
		Admit: []turnframe.Command{{Key: key, Case: turnframe.CaseKey("case-" + key), Name: "send"}},
		Settle: []turnframe.Settlement{{Key: key, To: turnframe.JournalExecuting, Attempt: attempt,
			Lease: time.Minute}},
	})
	if err != nil {
		return fmt.Errorf("begin %q: %w", key, err)
	}
	_, err = s.Apply(ctx, turnframe.Write{
		Account: account, Turn: turn, Now: now,
		Settle: []turnframe.Settlement{{Key: key, To: turnframe.JournalCommitted, Attempt: attempt}},
		Outbox: msgs,
	})
	if err != nil {
		return fmt.Errorf("commit %q: %w", key, err)
	}
	return nil
}

// earlierActiveSQL counts the rows of a key before a row that still hold
// the key: the ordering rule says there are none when the row is claimed.
const earlierActiveSQL = `SELECT count(*) FROM outbox AS o JOIN outbox AS r ON r.account = o.account AND r.order_key = o.order_key
	WHERE r.id = $1 AND o.order_key <> '' AND o.seq < r.seq AND o.status IN ('pending', 'dispatching', 'outcome_unknown', 'needs_intervention')`

// Several stores on one database (as several processes would be), each
// with several workers, claim and complete rows while an enqueuer adds
// more on a few order keys: every row is sent exactly once, no row is
// claimed while an earlier row of its key still holds the key, each key's
// rows go out in enqueue order, and none is left behind.
func TestOrderedDeliveryAcrossStores(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	url := pgtest.Schema(t)
	const storesN, workersN, commits, perCommit = 3, 8, 60, 3
	stores := make([]*pgstore.Store, storesN)
	for i := range stores {
		s, err := pgstore.Open(ctx, url)
		is.NoErr(err) // open one store per "process"
		t.Cleanup(func() { s.Close() })
		stores[i] = s
	}
	orderKeys := []string{"a", "b", "c", ""}
	claimAt := base.Add(time.Hour)

	var (
		mu       sync.Mutex
		sent     = make(map[turnframe.OutboxID]int)
		claimed  = make(map[string][]turnframe.OutboxID) // per order key, in claim order
		errs     []error
		enqueued sync.WaitGroup
		done     = make(chan struct{})
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	enqueued.Go(func() {
		ids := turnframe.NewIDGenerator()
		for i := range commits {
			msgs := make([]turnframe.OutboxMessage, perCommit)
			for j := range msgs {
				msgs[j] = turnframe.OutboxMessage{Destination: "d", OrderKey: orderKeys[(i+j)%len(orderKeys)]}
			}
			key := turnframe.IdempotencyKey(fmt.Sprintf("cmd-%d", i))
			if err := enqueueRows(ctx, stores[i%storesN], ids, "acme", key, base.Add(time.Duration(i)*time.Millisecond), msgs...); err != nil {
				fail(err)
				break
			}
		}
	})
	go func() { enqueued.Wait(); close(done) }()

	var workers sync.WaitGroup
	for si, s := range stores {
		for w := range workersN {
			name := fmt.Sprintf("s%d-w%d", si, w)
			workers.Go(func() {
				if err := work(ctx, s, name, claimAt, done, &mu, sent, claimed); err != nil {
					fail(fmt.Errorf("%s: %w", name, err))
				}
			})
		}
	}
	workers.Wait()
	for _, err := range errs {
		t.Error(err)
	}

	rows, err := stores[0].ListOutbox(ctx, turnframe.OutboxFilter{Limit: turnframe.MaxLimit})
	is.NoErr(err)                          // list
	is.Equal(len(rows), commits*perCommit) // every row enqueued
	want := make(map[string][]turnframe.OutboxID)
	for _, r := range rows {
		is.Equal(r.Status, turnframe.OutboxCompleted) // every row completed
		is.Equal(sent[r.ID], 1)                       // exactly once
		if r.OrderKey != "" {
			want[r.OrderKey] = append(want[r.OrderKey], r.ID)
		}
	}
	for _, k := range orderKeys[:3] {
		is.Equal(claimed[k], want[k]) // each key's rows were claimed in enqueue order
	}
}

// work claims and completes rows as worker until the enqueuer is done and
// no row is left. After each claim it checks the ordering rule against the
// database. Rows still left stuckAfter after the enqueuer is done are stuck:
// an error. (A count of pending rows after an empty claim proves nothing by
// itself: another worker's claim of them may not have committed yet, and on
// a loaded machine it may take a while to.)
func work(ctx context.Context, s *pgstore.Store, worker string, now time.Time, done <-chan struct{}, mu *sync.Mutex, sent map[turnframe.OutboxID]int, claimed map[string][]turnframe.OutboxID) error {
	var deadline time.Time // set once the enqueuer is done
	for limit := 1; ; limit = limit%3 + 1 {
		cs, err := s.ClaimDue(ctx, now, limit, worker, time.Minute)
		if err != nil {
			return fmt.Errorf("claim: %w", err)
		}
		if len(cs) == 0 {
			select {
			case <-done:
			default:
				continue // the enqueuer may add more
			}
			var n [2]int
			if err := s.Pool().QueryRow(ctx, countSQL).Scan(&n[0], &n[1]); err != nil {
				return err
			}
			switch {
			case n == [2]int{}:
				return nil // all sent
			case deadline.IsZero():
				deadline = time.Now().Add(stuckAfter)
			case time.Now().After(deadline):
				return fmt.Errorf("%d rows pending and %d dispatching that no claim took in %v", n[0], n[1], stuckAfter)
			}
			runtime.Gosched()
			continue
		}
		for _, c := range cs {
			var earlier int
			if err := s.Pool().QueryRow(ctx, earlierActiveSQL, c.ID.String()).Scan(&earlier); err != nil {
				return fmt.Errorf("check %v: %w", c.ID, err)
			}
			if earlier != 0 {
				return fmt.Errorf("row %v of key %q claimed while %d earlier rows of its key hold it", c.ID, c.OrderKey, earlier)
			}
			mu.Lock()
			sent[c.ID]++
			if c.OrderKey != "" {
				claimed[c.OrderKey] = append(claimed[c.OrderKey], c.ID)
			}
			mu.Unlock()
			if err := turnframe.CompleteClaim(ctx, s, c, "", now); err != nil {
				return fmt.Errorf("complete %v: %w", c.ID, err)
			}
		}
	}
}

// stuckAfter is how long rows may stay unsent once the enqueuer is done: a
// safety net far above any claim's time, for rows held behind nothing.
const stuckAfter = 30 * time.Second

// countSQL counts the rows left to send: pending, and dispatching.
const countSQL = `SELECT count(*) FILTER (WHERE status = 'pending'), count(*) FILTER (WHERE status = 'dispatching') FROM outbox`
