package pgstore_test

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
	"github.com/turnframe/turnframe/pgstore/pgtest"
)

// ApplyTx writes w "into tx", a transaction "it began on the same
// database", and names the store's tables without a schema, as every
// statement does: they resolve by tx's search_path, not the store's. With a
// schema per tenant (DESIGN.md §14: "stores on other schemas of the
// database — parallel tests, schema-per-tenant"), a transaction begun on
// another tenant's store, or on the application's own pool whose
// search_path leads to another turnframe schema, took tenant a's Write
// into tenant b's tables: ApplyTx said it was applied, a's store never saw
// it (its dispatcher never sends its rows, its keys never deduplicate), and
// b's store holds a turn and rows of a's. The store must refuse a
// transaction whose tables are not its own, with ErrInvalid, writing
// nothing.
func TestApplyTxRefusesATransactionOnAnotherSchema(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	a, b := mustOpen(t), mustOpen(t) // two tenants, a schema each
	tx, err := b.BeginTx(ctx)        // the app's transaction, on b's schema
	is.NoErr(err)
	defer tx.Rollback(ctx)

	applyRefusedOnOthersTx(t, a, b, tx)
}

// applyRefusedOnOthersTx has a apply a Write in tx, a transaction begun on
// b, commits tx, and asks that a refused it with ErrInvalid and that b
// holds nothing of it.
func applyRefusedOnOthersTx(t *testing.T, a, b *pgstore.Store, tx pgx.Tx) {
	t.Helper()
	is := is.New(t)
	ctx := context.Background()
	ids := turnframe.NewIDGenerator()
	now := time.Now()
	turn := ids.TurnID(now)
	_, err := a.ApplyTx(ctx, tx, turnframe.Write{Account: "acme", Turn: turn, Now: now,
		Begin: &turnframe.StoredTurn{Account: "acme", ID: turn, Conversation: ids.ConversationID(now), Text: "hi"},
		Admit: []turnframe.Command{{Key: "pay-1", Case: "c", Name: "pay"}},
	})
	t.Logf("a.ApplyTx on b's transaction: %v", err)
	is.NoErr(tx.Commit(ctx))
	_, inB := b.LoadTurn(ctx, "acme", turn)
	t.Logf("b.LoadTurn: %v", inB)
	is.True(errors.Is(inB, turnframe.ErrNotFound)) // nothing of a's Write in b's store
	is.True(errors.Is(err, turnframe.ErrInvalid))  // refused
}

// A transaction of the application's own pool whose search_path puts its
// own schema first and the store's after it reaches the store's tables, and
// is taken.
func TestApplyTxTakesATransactionWhoseSearchPathReachesTheStoresTables(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	storeURL := pgtest.Schema(t)
	s := mustOpenURL(t, storeURL)
	app := schemaOf(t, pgtest.Schema(t)) // the app's schema, first on its path
	pool, err := pgxpool.New(ctx, pgtest.WithParams(t, pgtest.ServerURL(t), url.Values{"search_path": {app + "," + schemaOf(t, storeURL)}}))
	is.NoErr(err)
	defer pool.Close()
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	is.NoErr(err)
	defer tx.Rollback(ctx)

	ids := turnframe.NewIDGenerator()
	now := time.Now()
	turn := ids.TurnID(now)
	_, err = s.ApplyTx(ctx, tx, turnframe.Write{Account: "acme", Turn: turn, Now: now,
		Begin: &turnframe.StoredTurn{Account: "acme", ID: turn, Conversation: ids.ConversationID(now), Text: "hi"}})
	is.NoErr(err) // taken
	is.NoErr(tx.Commit(ctx))
	_, err = s.LoadTurn(ctx, "acme", turn)
	is.NoErr(err) // and in the store's tables
}
