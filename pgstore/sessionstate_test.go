package pgstore_test

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
	"github.com/turnframe/turnframe/pgstore/pgtest"
)

// oneConnStore returns a store from New on a pool of the application's
// with one connection, on a schema of its own: what an App leaves on its
// session is what the store's next call meets, as it is, sooner or later,
// on a pool of any size.
func oneConnStore(t *testing.T, opts ...pgstore.Option) *pgstore.Store {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.WithParams(t, pgtest.Schema(t), url.Values{"pool_max_conns": {"1"}}))
	if err != nil {
		t.Fatalf("pool: %v", err)
	}
	t.Cleanup(pool.Close)
	s, err := pgstore.New(ctx, pool, opts...)
	if err != nil {
		t.Fatalf("new: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// beginAdmitting begins a turn of acme that admits the command pay under
// key, with app as its App.
func beginAdmitting(ctx context.Context, s *pgstore.Store, ids *turnframe.IDGenerator, key turnframe.IdempotencyKey, app func(context.Context, turnframe.Tx) error) (turnframe.TurnID, turnframe.Applied, error) {
	now := time.Now()
	turn := ids.TurnID(now)
	a, err := s.Apply(ctx, turnframe.Write{Account: "acme", Turn: turn, Now: now,
		Begin: &turnframe.StoredTurn{Account: "acme", ID: turn, Conversation: ids.ConversationID(now), Text: "pay"},
		Admit: []turnframe.Command{{Key: key, Case: "c", Name: "pay"}},
		App:   app,
	})
	return turn, a, err
}

// appRuns is an App that runs sql on the Write's transaction.
func appRuns(sql string) func(context.Context, turnframe.Tx) error {
	return func(ctx context.Context, tx turnframe.Tx) error {
		ptx, _ := pgstore.PgxTx(tx)
		_, err := ptx.Exec(ctx, sql)
		return err
	}
}

// New takes a pool of the application's, and a Write's App runs the app's
// statements on the store's own transaction (PgxTx). An application with a
// schema per tenant that switches its session to a tenant's schema for its
// own tables — SET search_path, without LOCAL — leaves the pooled
// connection so once the Write commits. The store's statements named their
// tables without a schema, so every later call on that connection went to
// tenant b's tables: tenant a's next turn was written into b's store (a's
// dispatcher never sends its rows, b's may), a's own turn read as not
// found, and a key a had admitted was admitted again as new — DESIGN.md §1,
// I14: "never runs a settled command twice" — so a payment made is made
// again.
func TestASessionAnAppMovedToAnotherSchemaKeepsTheStoreOnItsOwn(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	a := oneConnStore(t)
	bURL := pgtest.Schema(t)
	b := mustOpenURL(t, bURL) // tenant b's store, on the same database
	ids := turnframe.NewIDGenerator()

	first, _, err := beginAdmitting(ctx, a, ids, "pay-1", nil)
	is.NoErr(err)
	_, _, err = beginAdmitting(ctx, a, ids, "note-1", appRuns("SET search_path TO "+schemaOf(t, bURL)))
	is.NoErr(err) // the app moved its session to b's schema

	second, applied, err := beginAdmitting(ctx, a, ids, "pay-1", nil)
	is.NoErr(err)
	t.Logf("pay-1 admitted again: earlier turn %q", applied.Earlier[0].Turn)
	_, inB := b.LoadTurn(ctx, "acme", second)
	t.Logf("b.LoadTurn(a's second turn): %v", inB)
	is.True(errors.Is(inB, turnframe.ErrNotFound)) // nothing of a's in b's store
	_, err = a.LoadTurn(ctx, "acme", first)
	is.NoErr(err)                            // a still reads its own turn
	is.Equal(applied.Earlier[0].Turn, first) // and knows the key it admitted (I14)
}

// The same with a temporary table: PostgreSQL looks in pg_temp before any
// schema of the search_path, so an App that made a temporary table named
// as one of the store's (journal, outbox, events, history, turns) on the
// session shadowed the store's for every later call on that connection. A
// key admitted before was admitted again into the temporary table, as new
// (I14), and that admission vanished with the session.
func TestATempTableAnAppLeftOnTheSessionNeverShadowsTheStores(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s := oneConnStore(t)
	ids := turnframe.NewIDGenerator()

	first, _, err := beginAdmitting(ctx, s, ids, "pay-1", nil)
	is.NoErr(err)
	_, _, err = beginAdmitting(ctx, s, ids, "note-1", appRuns("CREATE TEMP TABLE journal (LIKE journal INCLUDING ALL)"))
	is.NoErr(err) // the app's scratch table, kept with the session

	_, applied, err := beginAdmitting(ctx, s, ids, "pay-1", nil)
	is.NoErr(err)
	t.Logf("pay-1 admitted again: earlier turn %q", applied.Earlier[0].Turn)
	is.Equal(applied.Earlier[0].Turn, first) // the key admitted before is known (I14)
}
