package pgstore_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
	"github.com/turnframe/turnframe/pgstore/pgtest"
)

// roundTrips is a pgx tracer that counts what a pool sends to the server:
// each statement sent alone, and each batch (one pipeline, one round trip).
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.n.Add(1)
	return ctx
}

func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.n.Add(1)
	return ctx
}

func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// during returns how many round trips f made.
func (r *roundTrips) during(f func()) int64 {
	before := r.n.Load()
	f()
	return r.n.Load() - before
}

// tracedStore opens a store in mode on a pool of its own whose round trips
// are counted.
func tracedStore(t *testing.T, mode pgstore.Clock) (*pgstore.Store, *roundTrips) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.Schema(t))
	if err != nil {
		t.Fatalf("parse url: %v", err)
	}
	trips := &roundTrips{}
	cfg.ConnConfig.Tracer = trips
	return storeOnPool(t, cfg, mode), trips
}

// executingTurn begins a turn of n commands and takes each under an
// attempt (untimed set-up), and returns the Write that commits command i:
// its Committed settlement, one event, one outbox row, as Runtime.Execute
// writes it; the last one also advances the turn, as Execute asks with a
// turn's last pending entry.
func executingTurn(t *testing.T, s *pgstore.Store, n int) func(i int) turnframe.Write {
	t.Helper()
	ctx := context.Background()
	gen := turnframe.NewIDGenerator()
	now := time.Now()
	turn := gen.TurnID(now)
	begin := turnframe.Write{
		Account: "acme", Turn: turn, Phase: turnframe.PhasePlanned, Now: now,
		Begin: &turnframe.StoredTurn{Account: "acme", ID: turn, Conversation: gen.ConversationID(now), Text: "trips"},
	}
	exec := turnframe.Write{Account: "acme", Turn: turn, Phase: turnframe.PhaseExecuting, Now: now}
	attempts := make([]turnframe.AttemptID, n)
	for i := range n {
		key := turnframe.IdempotencyKey("k" + strconv.Itoa(i))
		begin.Admit = append(begin.Admit, turnframe.Command{Key: key, Case: turnframe.CaseKey("c" + strconv.Itoa(i)), Name: "book"})
		attempts[i] = gen.AttemptID(now)
		exec.Settle = append(exec.Settle, turnframe.Settlement{Key: key, To: turnframe.JournalExecuting, Attempt: attempts[i], Lease: time.Minute})
	}
	for _, w := range []turnframe.Write{begin, exec} {
		if _, err := s.Apply(ctx, w); err != nil {
			t.Fatalf("set-up: %v", err)
		}
	}
	return func(i int) turnframe.Write {
		w := turnframe.Write{
			Account: "acme", Turn: turn, Now: time.Now(),
			Settle: []turnframe.Settlement{{Key: turnframe.IdempotencyKey("k" + strconv.Itoa(i)), To: turnframe.JournalCommitted, Attempt: attempts[i]}},
			Events: []turnframe.Event{{Case: turnframe.CaseKey("c" + strconv.Itoa(i)), Type: "booked", Data: []byte("{}")}},
			Outbox: []turnframe.OutboxMessage{{Destination: "mail", Payload: []byte("hi")}},
		}
		if i == n-1 {
			w.Advance = turnframe.PhaseCommitted
		}
		return w
	}
}

// The round trips of the hot writes are pinned: each statement whose
// answer the store does not read is queued and sent with the next one it
// does, BEGIN and COMMIT included, and on the database's clock a Write
// reads the clock in the statement that locks its turn. A change that adds
// a round trip to one of these fails here.
func TestRoundTrips(t *testing.T) {
	tests := []struct {
		name string
		mode pgstore.Clock
		// commit is a command's commit (BEGIN with the turn's lock; the
		// case's lock, its revision and the entry's lock; every write
		// with the COMMIT), last the turn's last one, which also counts
		// the turn's pending entries; claim is a claim of what that
		// enqueued (BEGIN with the claim; the records with the COMMIT),
		// settle the settlement of both claims (BEGIN with the rows'
		// locks; their UPDATE; the records with the COMMIT). On the
		// database's clock a claim and a settlement read it first.
		commit, last, claim, settle int64
	}{
		{name: "DatabaseClock", mode: pgstore.DatabaseClock, commit: 3, last: 4, claim: 3, settle: 4},
		{name: "CallerClock", mode: pgstore.CallerClock, commit: 3, last: 4, claim: 2, settle: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			ctx := context.Background()
			s, trips := tracedStore(t, tc.mode)
			commit := executingTurn(t, s, 2)

			var err error
			is.Equal(trips.during(func() { _, err = s.Apply(ctx, commit(0)) }), tc.commit) // round trips of a commit
			is.NoErr(err)                                                                  // the commit
			is.Equal(trips.during(func() { _, err = s.Apply(ctx, commit(1)) }), tc.last)   // round trips of the turn's last commit
			is.NoErr(err)                                                                  // the last commit
			turn, err := s.ListOutbox(ctx, turnframe.OutboxFilter{Limit: 10})
			is.NoErr(err)
			is.Equal(len(turn), 2) // both rows enqueued

			var claims []turnframe.Claim
			n := trips.during(func() { claims, err = s.ClaimDue(ctx, time.Now(), 16, "w1", time.Minute) })
			is.NoErr(err)            // the claim
			is.Equal(len(claims), 2) // both rows claimed
			is.Equal(n, tc.claim)    // round trips of a claim

			settlements := make([]turnframe.OutboxSettlement, len(claims))
			for i, c := range claims {
				settlements[i] = turnframe.OutboxSettlement{Claim: c, To: turnframe.OutboxCompleted, Code: "sent", Now: time.Now()}
			}
			var results []error
			n = trips.during(func() { results, err = s.Settle(ctx, settlements) })
			is.NoErr(err)                                 // the settlement
			is.Equal(results, make([]error, len(claims))) // both settled
			is.Equal(n, tc.settle)                        // round trips of a settlement
		})
	}
}
