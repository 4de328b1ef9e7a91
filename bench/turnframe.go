package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

// OpenStore opens a turnframe sqlitestore on path at the synchronous
// setting s (FULL is sqlitestore's default).
func OpenStore(ctx context.Context, path string, s Sync) (*sqlitestore.Store, error) {
	var opts []sqlitestore.Option
	if s == SyncNormal {
		opts = append(opts, sqlitestore.WithSynchronousNormal())
	}
	st, err := sqlitestore.Open(ctx, path, opts...)
	if err != nil {
		return nil, fmt.Errorf("open sqlitestore: %w", err)
	}
	return st, nil
}

// benchAccount is the tenant every turnframe contender writes as.
const benchAccount turnframe.AccountID = "bench"

// CommandLease is how long the fixture's attempts hold their entries: what
// a Runtime with the default options takes (command timeout + lease margin).
const CommandLease = turnframe.DefaultCommandTimeout + turnframe.DefaultLeaseMargin

// EnqueueFixture is n commands of turns in PhaseExecuting, each command
// Executing under its attempt: what must exist before a command can commit
// its event and outbox row. Building it is not timed.
type EnqueueFixture struct {
	Commits []turnframe.Write // one per command, ready to Apply (Now is set when applied)
}

// cmdsPerTurn is how many commands each fixture turn admits: enough to keep
// the untimed set-up short, few enough that a turn stays realistic.
const cmdsPerTurn = 8

// PrepareEnqueue builds the fixture in store: n/8 turns of 8 commands, each
// turn made by two Applies (begin + admit; executing, each entry leased). The
// timed part, Enqueue, is then exactly one Apply per command, the one
// Runtime.Execute writes: the Committed settlement, one 256-byte event, one
// 256-byte outbox row, and for each turn's last command the turn's Advance
// to PhaseCommitted.
func PrepareEnqueue(ctx context.Context, store turnframe.Store, n int) (*EnqueueFixture, error) {
	gen := turnframe.NewIDGenerator()
	fx := &EnqueueFixture{}
	for done := 0; done < n; {
		k := min(cmdsPerTurn, n-done)
		now := time.Now()
		turn := gen.TurnID(now)
		w := turnframe.Write{
			Account: benchAccount,
			Turn:    turn,
			Begin:   &turnframe.StoredTurn{Account: benchAccount, ID: turn, Conversation: gen.ConversationID(now), Text: "enqueue"},
			Phase:   turnframe.PhasePlanned,
			Now:     now,
		}
		exec := turnframe.Write{Account: benchAccount, Turn: turn, Phase: turnframe.PhaseExecuting, Now: now}
		for i := range k {
			key := turnframe.IdempotencyKey("enq-" + strconv.Itoa(done+i))
			c := turnframe.CaseKey("case/" + strconv.Itoa(done+i))
			w.Admit = append(w.Admit, turnframe.Command{Key: key, Case: c, Name: "book", Payload: []byte("{}")})
			attempt := gen.AttemptID(now)
			exec.Settle = append(exec.Settle, turnframe.Settlement{Key: key, To: turnframe.JournalExecuting, Attempt: attempt, Lease: CommandLease})
			payload := Payload()
			commit := turnframe.Write{
				Account: benchAccount,
				Turn:    turn,
				Settle:  []turnframe.Settlement{{Key: key, To: turnframe.JournalCommitted, Attempt: attempt}},
				Events:  []turnframe.Event{{Case: c, Type: "booked", Data: payload}},
				Outbox:  []turnframe.OutboxMessage{{Destination: "bench", Payload: payload}},
			}
			if i == k-1 {
				commit.Advance = turnframe.PhaseCommitted // as Execute asks with a turn's last pending entry
			}
			fx.Commits = append(fx.Commits, commit)
		}
		if _, err := store.Apply(ctx, w); err != nil {
			return nil, fmt.Errorf("fixture begin: %w", err)
		}
		if _, err := store.Apply(ctx, exec); err != nil {
			return nil, fmt.Errorf("fixture executing: %w", err)
		}
		done += k
	}
	return fx, nil
}

// Enqueue is turnframe's enqueue-in-tx: the i-th command's commit, one Apply.
func (fx *EnqueueFixture) Enqueue(ctx context.Context, store turnframe.Store, i int) error {
	w := fx.Commits[i]
	w.Now = time.Now()
	applied, err := store.Apply(ctx, w)
	if err != nil {
		return err
	}
	if len(applied.Outbox) != 1 || len(applied.Events) != 1 {
		return fmt.Errorf("apply wrote %d events and %d outbox rows, want 1 and 1", len(applied.Events), len(applied.Outbox))
	}
	return nil
}

// CheckCommitted fails unless every turn the fixture began is Committed:
// each turn's last commit carried the Advance that moved it.
func (fx *EnqueueFixture) CheckCommitted(ctx context.Context, db *sql.DB) error {
	var turns, committed int
	err := db.QueryRowContext(ctx, `SELECT count(*), count(*) FILTER (WHERE phase = 'committed') FROM turns`).Scan(&turns, &committed)
	if err != nil {
		return err
	}
	if want := (len(fx.Commits) + cmdsPerTurn - 1) / cmdsPerTurn; turns != want || committed != want {
		return fmt.Errorf("%d turns, %d of them committed, want %d and %d", turns, committed, want, want)
	}
	return nil
}

// SeedRows describes rows to insert straight into turnframe's outbox table
// with SQL, for set-ups too big to build through Apply (a million finished
// rows): they are shaped exactly like rows Apply writes.
type SeedRows struct {
	N        int
	Status   string    // "pending", "completed", "outcome_unknown", …
	Due      time.Time // due_at of every row
	OrderKey string    // "" for unordered rows
}

// Seed inserts each batch of rows, in order, into the turnframe file at path
// through its own connection (the store may be open). Ids are 26-digit
// numbers, valid ULID text that sorts before every generated id; one turn
// row carries them all. Like the store, it marks held every Pending row an
// earlier row of its order key holds back, so that the claim's index is what
// the store's would be.
func Seed(ctx context.Context, path string, batches ...SeedRows) error {
	db, err := OpenDB(ctx, path, SyncNormal, true, 1)
	if err != nil {
		return err
	}
	defer db.Close()
	turn := fmt.Sprintf("%026d", 1)
	_, err = db.ExecContext(ctx, `INSERT OR IGNORE INTO turns (id, account, conversation, text, phase, received_at, updated_at)
VALUES (?1, ?2, ?1, 'seed', 'delivered', 0, 0)`, turn, string(benchAccount))
	if err != nil {
		return fmt.Errorf("seed turn: %w", err)
	}
	for _, b := range batches {
		finished := int64(0)
		if b.Status == "completed" || b.Status == "failed" {
			finished = b.Due.UnixMicro()
		}
		for done := 0; done < b.N; {
			k := min(200_000, b.N-done)
			_, err := db.ExecContext(ctx, `
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ?1),
     base(b) AS (SELECT coalesce(max(seq), 0) FROM outbox)
INSERT INTO outbox (id, account, turn, key, destination, payload, order_key, status, attempts,
                    due_at, claimed_by, claimed_at, last_code, remote_ref, created_at, updated_at, finished_at)
SELECT printf('%026d', b + x), ?2, ?3, 'seed-' || (b + x), 'bench', randomblob(?4), ?5, ?6, 0,
       ?7, '', 0, '', '', ?7, ?7, ?8
FROM c, base`, k, string(benchAccount), turn, PayloadSize, b.OrderKey, b.Status, b.Due.UnixMicro(), finished)
			if err != nil {
				return fmt.Errorf("seed outbox: %w", err)
			}
			done += k
		}
	}
	_, err = db.ExecContext(ctx, `UPDATE outbox SET held = 1
WHERE status = 'pending' AND order_key <> '' AND EXISTS (
	SELECT 1 FROM outbox AS p WHERE p.account = outbox.account AND p.order_key = outbox.order_key
	  AND p.order_key <> '' AND p.seq < outbox.seq AND p.status IN ('pending', 'dispatching', 'outcome_unknown', 'needs_intervention'))`)
	if err != nil {
		return fmt.Errorf("seed held marks: %w", err)
	}
	return nil
}

// CountStatus returns how many outbox rows of the file at path have status.
func CountStatus(ctx context.Context, db *sql.DB, status string) (int, error) {
	var n int
	err := db.QueryRowContext(ctx, `SELECT count(*) FROM outbox WHERE status = ?`, status).Scan(&n)
	return n, err
}

// NoopSender completes every row at once and counts what it was handed.
type NoopSender struct {
	Sent atomic.Int64
	// Record, when not nil, is told every id sent (the two-process check).
	Record func(turnframe.OutboxID)
}

// Send implements turnframe.Sender.
func (s *NoopSender) Send(_ context.Context, e turnframe.OutboxEntry) turnframe.Dispatched {
	s.Sent.Add(1)
	if s.Record != nil {
		s.Record(e.ID)
	}
	return turnframe.Dispatched{Kind: turnframe.DispatchCompleted}
}

// DrainDispatcher runs d.RunOnce until a sweep claims nothing, or until at
// least upTo rows completed (upTo <= 0: no limit), and returns how many rows
// completed. Any row not completed is an error: the sender completes
// everything.
func DrainDispatcher(ctx context.Context, d *turnframe.Dispatcher, upTo int) (int, error) {
	total := 0
	for upTo <= 0 || total < upTo {
		rep, err := d.RunOnce(ctx, time.Now())
		if err != nil {
			return total, err
		}
		if rep.IsEmpty() {
			return total, nil
		}
		if n := rep.Claimed() - len(rep.Completed); n != 0 {
			return total, fmt.Errorf("dispatch: %d of %d claimed rows not completed (retried %d, failed %d, unknown %d, unsettled %d)",
				n, rep.Claimed(), len(rep.Retried), len(rep.Failed), len(rep.Unknown), len(rep.Unsettled))
		}
		total += len(rep.Completed)
	}
	return total, nil
}

// NewDispatcher returns a dispatcher over store with the default
// configuration, worker id worker and the given send concurrency.
func NewDispatcher(store turnframe.OutboxStore, sender turnframe.Sender, worker string, concurrency int) *turnframe.Dispatcher {
	cfg := turnframe.DefaultDispatchConfig(worker)
	cfg.Concurrency = concurrency
	return turnframe.NewDispatcher(store, sender, cfg)
}

// CountingStore is a Store that counts its write transactions: every Apply.
type CountingStore struct {
	turnframe.Store
	Applies atomic.Int64
}

// Apply counts the call and passes it on.
func (c *CountingStore) Apply(ctx context.Context, w turnframe.Write) (turnframe.Applied, error) {
	c.Applies.Add(1)
	return c.Store.Apply(ctx, w)
}

// RunTurn runs one whole turn: Receive, Plan with one command, Execute
// committing one event and one outbox row, Deliver.
func RunTurn(ctx context.Context, rt *turnframe.Runtime, i int, payload []byte) error {
	conv := rt.NewConversationID()
	turn, err := rt.Receive(ctx, benchAccount, conv, "book a table for two")
	if err != nil {
		return fmt.Errorf("receive: %w", err)
	}
	key := turnframe.IdempotencyKey("turn-" + strconv.Itoa(i))
	c := turnframe.CaseKey("table/" + strconv.Itoa(i))
	_, err = rt.Plan(ctx, benchAccount, turn, turnframe.Plan{
		Commands: []turnframe.Command{{Key: key, Case: c, Name: "book", Payload: []byte(`{"seats":2}`)}},
	})
	if err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	h := turnframe.HandlerFunc(func(ctx context.Context, call turnframe.Call) turnframe.Outcome {
		return turnframe.Commit(
			[]turnframe.Event{{Case: call.Command.Case, Type: "booked", Data: payload}},
			turnframe.OutboxMessage{Destination: "bench", Payload: payload},
		)
	})
	rep, err := rt.Execute(ctx, benchAccount, turn, h)
	if err != nil {
		return fmt.Errorf("execute: %w", err)
	}
	_ = rep
	if err := rt.Deliver(ctx, benchAccount, turn, "booked"); err != nil {
		return fmt.Errorf("deliver: %w", err)
	}
	return nil
}

// ClaimLease is the lease every claim the bench makes by hand takes: the
// one a dispatcher with the default configuration takes.
var ClaimLease = turnframe.DefaultDispatchConfig("bench").Lease()

// ClaimLatencies claims batches of 16 k times and returns each claim's
// latency (one transaction each, commit included).
func ClaimLatencies(ctx context.Context, store turnframe.OutboxStore, k int) ([]time.Duration, error) {
	out := make([]time.Duration, 0, k)
	for range k {
		start := time.Now()
		claims, err := store.ClaimDue(ctx, start, 16, "scale", ClaimLease)
		if err != nil {
			return nil, err
		}
		out = append(out, time.Since(start))
		if len(claims) != 16 {
			return nil, errors.New("claim latency: fewer than 16 rows due")
		}
	}
	return out, nil
}

// CountingOutbox is an OutboxStore that counts claim, settle and
// lease-extension transactions and the rows they carried: how well
// settlements coalesce, and whether a sweep ever ran long enough to extend
// its leases.
type CountingOutbox struct {
	turnframe.OutboxStore
	Claims, Settles, Settled, Extends atomic.Int64
}

// ClaimDue counts the call and passes it on.
func (c *CountingOutbox) ClaimDue(ctx context.Context, now time.Time, limit int, worker string, lease time.Duration) ([]turnframe.Claim, error) {
	c.Claims.Add(1)
	return c.OutboxStore.ClaimDue(ctx, now, limit, worker, lease)
}

// ExtendClaims counts the call and passes it on.
func (c *CountingOutbox) ExtendClaims(ctx context.Context, claims []turnframe.Claim, now time.Time, lease time.Duration) ([]error, error) {
	c.Extends.Add(1)
	return c.OutboxStore.ExtendClaims(ctx, claims, now, lease)
}

// Settle counts the call and its settlements and passes it on.
func (c *CountingOutbox) Settle(ctx context.Context, s []turnframe.OutboxSettlement) ([]error, error) {
	c.Settles.Add(1)
	c.Settled.Add(int64(len(s)))
	return c.OutboxStore.Settle(ctx, s)
}
