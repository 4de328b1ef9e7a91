package pgstore_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
)

// A write whose COMMIT was sent and never answered (claimcommit_test's
// answerCutter) is asked about on another connection: a transaction the
// server committed is a write that landed, one it rolled back wrote
// nothing and runs again. These tests are the writes other than a claim.

// DESIGN.md §8 and I15: a command's outcome is unknown when its handler
// "may have run". Execute's take (the write that moves the entry to
// Executing under a lease) whose COMMIT ran while its answer was lost
// returned a raw driver error: the handler never ran, but the entry stood
// Executing. Once its lease ended, Execute declared its outcome unknown
// (lease ended), and a command whose remote can neither deduplicate nor be
// asked went to a person: a false escalation of a command that never ran.
func TestAnExecuteWhoseTakesCommitAnswerIsLostRunsItsCommandOnce(t *testing.T) {
	eachClock(t, func(t *testing.T, clock pgstore.Clock) {
		is := is.New(t)
		ctx := context.Background()
		s, k := cutterStore(t, clock)
		var mu sync.Mutex
		now := time.Now()
		at := func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			return now
		}
		rt := turnframe.New(s, turnframe.WithClock(at), turnframe.WithCommand("book", turnframe.Remote{}))
		turn, err := rt.Receive(ctx, "acme", rt.NewConversationID(), "book the seat")
		is.NoErr(err)
		_, err = rt.Plan(ctx, "acme", turn, turnframe.Plan{Commands: []turnframe.Command{{Key: "k", Case: "c", Name: "book"}}})
		is.NoErr(err)
		var calls atomic.Int32
		h := turnframe.HandlerFunc(func(context.Context, turnframe.Call) turnframe.Outcome {
			calls.Add(1)
			return turnframe.Commit([]turnframe.Event{{Case: "c", Type: "booked"}})
		})

		k.armed.Store(true) // the take's COMMIT runs, its answer is lost
		_, first := rt.Execute(ctx, "acme", turn, h)
		is.Equal(k.cut.Load(), int64(1)) // the take's answer was cut
		mu.Lock()
		now = now.Add(time.Hour) // every lease the take could have given ended
		mu.Unlock()
		_, later := rt.Execute(ctx, "acme", turn, h)

		entries, err := s.ForTurn(ctx, "acme", turn)
		is.NoErr(err)
		t.Logf("first Execute: %v; later: %v; entry %v, code %q; handler calls %d", first, later, entries[0].Status, entries[0].Code, calls.Load())
		is.True(!entries[0].Status.IsUncertain())               // a command that never ran is never unknown
		is.Equal(calls.Load(), int32(1))                        // it ran, once
		is.Equal(entries[0].Status, turnframe.JournalCommitted) // and its outcome was written
		is.NoErr(first)                                         // by the Execute whose take landed
	})
}

// DESIGN.md §8: "A settlement always lands"; RunOnce reports a row
// Unsettled only when the store refused its settlement for good. A
// settlement whose COMMIT ran while its answer was lost landed: the row is
// Completed, and the dispatcher says so.
func TestASettlementWhoseCommitAnswerIsLostIsReportedSettled(t *testing.T) {
	eachClock(t, func(t *testing.T, clock pgstore.Clock) {
		is := is.New(t)
		ctx := context.Background()
		s, k := cutterStore(t, clock)
		now := onePayment(t, s)

		var sends atomic.Int64
		sender := turnframe.SenderFunc(func(ctx context.Context, e turnframe.OutboxEntry) turnframe.Dispatched {
			sends.Add(1)
			k.armed.Store(true) // the settlement's COMMIT runs, its answer is lost
			return turnframe.Dispatched{Kind: turnframe.DispatchCompleted}
		})
		d := turnframe.NewDispatcher(s, sender, turnframe.DefaultDispatchConfig("w"))
		report, err := d.RunOnce(ctx, now)
		t.Logf("RunOnce with its settlement's answer cut: %+v, %v", report, err)
		is.Equal(k.cut.Load(), int64(1)) // the settlement's answer was cut
		is.Equal(sends.Load(), int64(1))
		rows, lerr := s.ListOutbox(ctx, turnframe.OutboxFilter{Limit: 10})
		is.NoErr(lerr)
		is.Equal(rows[0].Status, turnframe.OutboxCompleted) // the settlement landed
		is.NoErr(err)
		is.Equal(len(report.Unsettled), 0) // and is reported as it landed
		is.Equal(len(report.Completed), 1)
	})
}

// DESIGN.md §4: ErrBusy is "nothing was written, the same call may be
// tried again". A write whose last round trip (the statements queued for
// the COMMIT, and the COMMIT) never reached the server was rolled back
// with its connection: the store runs it again, and it lands once; with no
// retries left it is ErrBusy, nothing written. It used to return a raw
// driver error, an outcome the caller could not know.
func TestAWriteWhoseCommitNeverRanIsRunAgainAndLandsOnce(t *testing.T) {
	eachClock(t, func(t *testing.T, clock pgstore.Clock) {
		is := is.New(t)
		ctx := context.Background()
		s, k := cutterStore(t, clock)
		now := time.Now()
		k.sendArmed.Store(true) // the first write's last round trip is lost
		err := enqueueRows(ctx, s, turnframe.NewIDGenerator(), "acme", "pay", now, turnframe.OutboxMessage{Destination: "d"})
		t.Logf("enqueue with its first write's COMMIT lost: %v", err)
		is.Equal(k.cut.Load(), int64(1)) // the COMMIT was lost
		is.NoErr(err)                    // run again, it landed
		rows, err := s.ListOutbox(ctx, turnframe.OutboxFilter{Limit: 10})
		is.NoErr(err)
		is.Equal(len(rows), 1) // once
		var turns int
		is.NoErr(s.Pool().QueryRow(ctx, `SELECT count(*) FROM turns`).Scan(&turns))
		is.Equal(turns, 1) // one turn begun
	})
	t.Run("NoRetries", func(t *testing.T) {
		is := is.New(t)
		ctx := context.Background()
		s, k := cutterStore(t, pgstore.CallerClock, pgstore.WithRetries(0))
		k.sendArmed.Store(true)
		err := enqueueRows(ctx, s, turnframe.NewIDGenerator(), "acme", "pay", time.Now(), turnframe.OutboxMessage{Destination: "d"})
		t.Logf("enqueue with its first write's COMMIT lost, no retries: %v", err)
		is.Equal(k.cut.Load(), int64(1))
		is.True(errors.Is(err, turnframe.ErrBusy)) // nothing written, try again
		var turns int
		is.NoErr(s.Pool().QueryRow(ctx, `SELECT count(*) FROM turns`).Scan(&turns))
		is.Equal(turns, 0) // and nothing was
	})
}

// appBegin is a Write that begins a turn and, in its App, inserts the
// application's row key, counting the App's calls in calls.
func appBegin(now time.Time, key string, calls *atomic.Int32) turnframe.Write {
	ids := turnframe.NewIDGenerator()
	turn := ids.TurnID(now)
	return turnframe.Write{Account: "acme", Turn: turn, Now: now,
		Begin: &turnframe.StoredTurn{Account: "acme", ID: turn, Conversation: ids.ConversationID(now), Text: "book"},
		App: func(ctx context.Context, tx turnframe.Tx) error {
			calls.Add(1)
			ptx, _ := pgstore.PgxTx(tx)
			_, err := ptx.Exec(ctx, `INSERT INTO app_rows (key, value) VALUES ($1, 'booked')`, key)
			return err
		},
	}
}

// DESIGN.md §6: an App's writes commit with the Write, and a Write that
// called its App never runs again. One whose COMMIT ran while its answer
// was lost committed both: Apply says so, and the app's row is there once.
// With the COMMIT lost on its way, nothing was written, the app's row
// neither: ErrBusy, and the App ran once.
func TestAWriteWithAnAppWhoseCommitAnswerIsLostLandsOnce(t *testing.T) {
	eachClock(t, func(t *testing.T, clock pgstore.Clock) {
		is := is.New(t)
		ctx := context.Background()
		s, k := cutterStore(t, clock)
		withAppTable(t, s)
		var calls atomic.Int32
		w := appBegin(time.Now(), "seat", &calls)
		k.armed.Store(true) // the COMMIT runs, its answer is lost
		_, err := s.Apply(ctx, w)
		t.Logf("apply with its COMMIT's answer cut: %v", err)
		is.Equal(k.cut.Load(), int64(1)) // the answer was cut
		var n int
		is.NoErr(s.Pool().QueryRow(ctx, `SELECT count(*) FROM app_rows WHERE key = 'seat'`).Scan(&n))
		is.Equal(n, 1)                   // the app's row is there, once
		is.Equal(calls.Load(), int32(1)) // the App ran once
		is.NoErr(err)                    // and Apply says it landed
		_, err = s.LoadTurn(ctx, "acme", w.Turn)
		is.NoErr(err) // with the Write
	})
	t.Run("CommitNeverRan", func(t *testing.T) {
		is := is.New(t)
		ctx := context.Background()
		s, k := cutterStore(t, pgstore.CallerClock)
		withAppTable(t, s)
		var calls atomic.Int32
		w := appBegin(time.Now(), "seat", &calls)
		k.sendArmed.Store(true) // the COMMIT is lost on its way
		_, err := s.Apply(ctx, w)
		t.Logf("apply with its COMMIT lost: %v", err)
		is.Equal(k.cut.Load(), int64(1))
		is.True(errors.Is(err, turnframe.ErrBusy)) // nothing written, try again
		is.Equal(calls.Load(), int32(1))           // the App ran once, never again
		var n int
		is.NoErr(s.Pool().QueryRow(ctx, `SELECT count(*) FROM app_rows`).Scan(&n))
		is.Equal(n, 0) // its row went with the Write
		_, err = s.LoadTurn(ctx, "acme", w.Turn)
		is.True(errors.Is(err, turnframe.ErrNotFound))
	})
}

// A COMMIT lost in a cut the server has not seen yet leaves its session in
// the transaction: the store finds it in progress and waits for it to end.
// Here the server sees the connection end once the store first asked: the
// transaction rolled back, and the write runs again and lands once.
func TestAWriteWhoseTransactionIsStillInProgressIsWaitedFor(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s, k := cutterStore(t, pgstore.CallerClock)
	k.onAsk = func(int64) { k.releaseHeld() }
	k.holdArmed.Store(true) // the first write's COMMIT is lost, its session left open
	err := enqueueRows(ctx, s, turnframe.NewIDGenerator(), "acme", "pay", time.Now(), turnframe.OutboxMessage{Destination: "d"})
	t.Logf("enqueue with its first write's COMMIT lost: %v; asked %d times", err, k.asked.Load())
	is.Equal(k.cut.Load(), int64(1)) // the COMMIT was lost
	is.True(k.asked.Load() >= 2)     // in progress when first asked, asked again
	is.NoErr(err)                    // rolled back, run again, landed
	rows, err := s.ListOutbox(ctx, turnframe.OutboxFilter{Limit: 10})
	is.NoErr(err)
	is.Equal(len(rows), 1) // once
}

// When the transaction does not end within the store's bound, its outcome
// stays unknown: never a guess, never ErrBusy (which says nothing was
// written).
func TestAWriteWhoseTransactionNeverEndsStaysUnknown(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s, k := cutterStore(t, pgstore.CallerClock)
	// Long enough for a question on a new connection under the race
	// detector on a loaded host: at 100 ms one run gave up before the
	// first question reached the server ("asked 0 times").
	pgstore.SetCommitWait(s, 2*time.Second)
	k.holdArmed.Store(true) // the COMMIT is lost, its session left open until the test ends
	err := enqueueRows(ctx, s, turnframe.NewIDGenerator(), "acme", "pay", time.Now(), turnframe.OutboxMessage{Destination: "d"})
	t.Logf("enqueue with its first write's COMMIT lost for good: %v; asked %d times", err, k.asked.Load())
	is.Equal(k.cut.Load(), int64(1))            // the COMMIT was lost
	is.True(k.asked.Load() >= 1)                // the store asked
	is.True(err != nil)                         // it cannot tell
	is.True(!errors.Is(err, turnframe.ErrBusy)) // and does not say nothing was written
}

// Under pgx's simple protocol (default_query_exec_mode=simple_protocol, as
// a pool behind PgBouncer sets), a batch's answers are read as one
// multi-result stream, and an answer that broke off surfaces as pgx's
// "conn closed", which pgx calls safe to retry. A COMMIT batch whose answer
// broke off was taken for one whose COMMIT never ran (its first queued
// statement "failed"), and run again: the write that had landed was
// refused by its own copy (a Begin of a turn id that exists: ErrConflict).
func TestUnderTheSimpleProtocolAWriteWhoseCommitAnswerIsLostLandsOnce(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	cfg, k := cutterConfig(t)
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	s := storeOnPool(t, cfg, pgstore.CallerClock)
	k.armed.Store(true) // the first write's COMMIT runs, its answer is lost
	err := enqueueRows(ctx, s, turnframe.NewIDGenerator(), "acme", "pay", time.Now(), turnframe.OutboxMessage{Destination: "d"})
	t.Logf("enqueue with its first write's COMMIT answer cut: %v", err)
	is.Equal(k.cut.Load(), int64(1)) // the answer was cut
	is.NoErr(err)                    // the write landed, and says so
	rows, err := s.ListOutbox(ctx, turnframe.OutboxFilter{Limit: 10})
	is.NoErr(err)
	is.Equal(len(rows), 1) // once
}
