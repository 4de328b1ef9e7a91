package pgstore_test

import (
	"context"
	"errors"
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

// everyRead is each read of the store, the Store's and the operator's,
// made once on s at now about the one payment onePayment enqueued (its
// row, its turn).
func everyRead(s *pgstore.Store, now time.Time, row turnframe.OutboxRecord) map[string]func(ctx context.Context) error {
	acme, turn := row.Account, row.Turn
	ids := turnframe.NewIDGenerator()
	return map[string]func(ctx context.Context) error{
		"LoadTurn":  func(ctx context.Context) error { _, err := s.LoadTurn(ctx, acme, turn); return err },
		"TurnPhase": func(ctx context.Context) error { _, err := s.TurnPhase(ctx, acme, turn); return err },
		"ForTurn":   func(ctx context.Context) error { _, err := s.ForTurn(ctx, acme, turn); return err },
		"ByKey":     func(ctx context.Context) error { _, err := s.ByKey(ctx, acme, "pay"); return err },
		"Replay":    func(ctx context.Context) error { _, err := s.Replay(ctx, acme, turn); return err },
		"GetOutbox": func(ctx context.Context) error { _, err := s.GetOutbox(ctx, row.ID); return err },
		"ListOutbox": func(ctx context.Context) error {
			_, err := s.ListOutbox(ctx, turnframe.OutboxFilter{Limit: 10})
			return err
		},
		"History": func(ctx context.Context) error {
			_, err := s.History(ctx, turnframe.OutboxSubject(acme, row.ID), 0, 10)
			return err
		},
		"EventsByID": func(ctx context.Context) error {
			_, err := s.EventsByID(ctx, acme, []turnframe.EventID{ids.EventID(now)})
			return err
		},
		"EventsSince": func(ctx context.Context) error { _, err := s.EventsSince(ctx, acme, "c", 0, 10); return err },
		"CaseRevision": func(ctx context.Context) error {
			_, err := s.CaseRevision(ctx, acme, "c")
			return err
		},
		"ListUnfinishedTurns": func(ctx context.Context) error {
			_, err := s.ListUnfinishedTurns(ctx, turnframe.RecoveryScope{}, 10)
			return err
		},
		"Counts":      func(ctx context.Context) error { _, err := s.Counts(ctx); return err },
		"DueAt":       func(ctx context.Context) error { _, err := s.DueAt(ctx, now); return err },
		"EndedLeases": func(ctx context.Context) error { _, _, err := s.EndedLeases(ctx, now, 10); return err },
		"EntriesIn": func(ctx context.Context) error {
			_, _, err := s.EntriesIn(ctx, turnframe.JournalPending, 10)
			return err
		},
		"ListTurns":   func(ctx context.Context) error { _, err := s.ListTurns(ctx, acme, turnframe.TurnID{}, 10); return err },
		"TurnAccount": func(ctx context.Context) error { _, err := s.TurnAccount(ctx, turn); return err },
		"TurnOutbox": func(ctx context.Context) error {
			_, err := s.TurnOutbox(ctx, turn, turnframe.OutboxID{}, 10)
			return err
		},
		"DestinationCounts": func(ctx context.Context) error { _, err := s.DestinationCounts(ctx, 10); return err },
		"OutboxBefore":      func(ctx context.Context) error { _, err := s.OutboxBefore(ctx, row.ID, acme); return err },
	}
}

// DESIGN.md §4: ErrBusy is "the one transient error: ... nothing was
// written, the same call may be tried again", and Open's doc: "Once open, a
// connection that cannot be opened is ErrBusy whatever the cause". A write
// met a dropped connection as ErrBusy since §15; a read did not. A read on
// a connection the server ended (a restart, a failover: FATAL 57P01), or
// while the server could not be reached, returned the driver's error bare:
// the operator's page answered 500, "a fault to look into", where the
// honest answer is 503, try again in a moment, and an application could
// not tell it from a bug. Every read now answers, or is ErrBusy.
func TestAReadOnADroppedConnectionIsBusyOrAnswers(t *testing.T) {
	eachClock(t, func(t *testing.T, clock pgstore.Clock) {
		s, killer, now := oneRowAndAKiller(t, clock)
		for name, read := range everyRead(s, now, theRow(t, s)) {
			t.Run(name, func(t *testing.T) {
				is := is.New(t)
				holdIdle(t, s, 2) // one for a read of the database's clock, one for the read
				killIdle(t, s, killer)
				err := read(context.Background())
				t.Logf("a read after the server ended its connection: %v", err)
				is.True(err == nil || errors.Is(err, turnframe.ErrNotFound) || errors.Is(err, turnframe.ErrBusy)) // answered, or busy: never a bare driver error
			})
		}
	})
}

// holdIdle leaves at least n connections idle in s's pool, for killIdle:
// a read that met a dead one left the pool without it.
func holdIdle(t *testing.T, s *pgstore.Store, n int) {
	t.Helper()
	var held []*pgxpool.Conn
	for range n {
		c, err := s.Pool().Acquire(context.Background())
		if err != nil {
			t.Fatalf("acquire: %v", err)
		}
		held = append(held, c)
	}
	for _, c := range held {
		c.Release()
	}
}

// The same while the server cannot be reached at all (a restart's few
// seconds): no connection can be opened, and every read is ErrBusy.
func TestAReadWhileTheServerIsUnreachableIsBusy(t *testing.T) {
	eachClock(t, func(t *testing.T, clock pgstore.Clock) {
		is := is.New(t)
		ctx := context.Background()
		cfg, err := pgxpool.ParseConfig(pgtest.Schema(t))
		is.NoErr(err)
		var down atomic.Bool
		cfg.BeforeConnect = func(ctx context.Context, _ *pgx.ConnConfig) error {
			if down.Load() {
				return errors.New("dial tcp: connection refused (the server is restarting)")
			}
			return nil
		}
		s := storeOnPool(t, cfg, clock)
		now := onePayment(t, s)
		row := theRow(t, s)
		for _, c := range s.Pool().AcquireAllIdle(ctx) { // the server goes away with every connection
			c.Conn().Close(ctx)
			c.Release()
		}
		down.Store(true)
		for name, read := range everyRead(s, now, row) {
			t.Run(name, func(t *testing.T) {
				is := is.New(t)
				err := read(ctx)
				t.Logf("a read while the server is down: %v", err)
				is.True(errors.Is(err, turnframe.ErrBusy)) // try again: nothing is wrong with the call
			})
		}
	})
}

// BeginTx, the start of an application's transaction, is the same: its
// BEGIN met a connection the server had ended, or none could be opened,
// and it returned the driver's error bare, where nothing was written and
// the application may begin again.
func TestABeginTxOnADroppedConnectionIsBusy(t *testing.T) {
	t.Run("Ended", func(t *testing.T) {
		is := is.New(t)
		s, killer, _ := oneRowAndAKiller(t, pgstore.CallerClock)
		killIdle(t, s, killer)
		tx, err := s.BeginTx(context.Background())
		if err == nil {
			tx.Rollback(context.Background())
		}
		t.Logf("a BeginTx after the server ended its connection: %v", err)
		is.True(err == nil || errors.Is(err, turnframe.ErrBusy)) // begun, or busy: never a bare driver error
	})
	t.Run("Unreachable", func(t *testing.T) {
		is := is.New(t)
		ctx := context.Background()
		cfg, err := pgxpool.ParseConfig(pgtest.Schema(t))
		is.NoErr(err)
		var down atomic.Bool
		cfg.BeforeConnect = func(ctx context.Context, _ *pgx.ConnConfig) error {
			if down.Load() {
				return errors.New("dial tcp: connection refused (the server is restarting)")
			}
			return nil
		}
		s := storeOnPool(t, cfg, pgstore.CallerClock)
		for _, c := range s.Pool().AcquireAllIdle(ctx) {
			c.Conn().Close(ctx)
			c.Release()
		}
		down.Store(true)
		_, err = s.BeginTx(ctx)
		t.Logf("a BeginTx while the server is down: %v", err)
		is.True(errors.Is(err, turnframe.ErrBusy)) // try again
	})
}
