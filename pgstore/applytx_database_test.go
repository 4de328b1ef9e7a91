package pgstore_test

import (
	"context"
	"crypto/rand"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"
	"github.com/turnframe/turnframe/pgstore/pgtest"
)

// ApplyTx refuses a transaction whose search_path leads the tables to
// another schema than the store's, comparing schema names only. With a
// database per tenant on one server (as common as a schema per tenant),
// the tenants' stores live in schemas of the same name — public, or the
// one name every tenant's deployment uses — and a transaction begun on
// tenant b's database passes the check: tenant a's Write lands in b's
// database, ApplyTx says it was applied, a's store never sees it. The
// tables must resolve to the store's schema in the store's database.
func TestApplyTxRefusesATransactionOnAnotherDatabase(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	aURL := pgtest.Schema(t) // tenant a: a schema in the test database
	schema := schemaOf(t, aURL)

	// Tenant b: a database of its own, its store in a schema of the same name.
	base := pgtest.ServerURL(t)
	db := "t_" + strings.ToLower(rand.Text())
	admin, err := pgx.Connect(ctx, base)
	is.NoErr(err)
	t.Cleanup(func() { admin.Close(context.Background()) })
	_, err = admin.Exec(ctx, "CREATE DATABASE "+db)
	is.NoErr(err)
	t.Cleanup(func() { // after b's store closed
		if _, err := admin.Exec(context.Background(), "DROP DATABASE "+db+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", db, err)
		}
	})
	u, err := url.Parse(base)
	is.NoErr(err)
	u.Path = "/" + db
	bBase := u.String()
	bConn, err := pgx.Connect(ctx, bBase)
	is.NoErr(err)
	_, err = bConn.Exec(ctx, "CREATE SCHEMA "+schema)
	is.NoErr(err)
	is.NoErr(bConn.Close(ctx))

	a := mustOpenURL(t, aURL)
	b := mustOpenURL(t, pgtest.WithParams(t, bBase, url.Values{"search_path": {schema}}))
	tx, err := b.BeginTx(ctx) // the app's transaction, on b's database
	is.NoErr(err)
	defer tx.Rollback(ctx)

	applyRefusedOnOthersTx(t, a, b, tx)
}
