package pgstore_test

import (
	"context"
	"crypto/rand"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
	"github.com/turnframe/turnframe/pgstore/pgtest"
)

// PostgreSQL's default search_path is `"$user", public`: tables go to
// public until a schema named after the role exists, and then to it. An
// application that has run for months on such a URL (its tables in the
// second schema of the path, the first not existing) has a DBA create the
// role's schema one day — for the application's own tables, or by habit
// (CREATE SCHEMA AUTHORIZATION app). The next Open migrated a whole new,
// empty turnframe schema into it and used that one: every pending outbox
// row, unknown outcome and command in flight stranded in the old schema,
// and every idempotency key forgotten — DESIGN.md §5, "A key is admitted
// once per account, forever" — so a command already run (and its payment
// made) is admitted and run again under its key as if new.
//
// Open must refuse, naming the schema that holds the store, rather than
// shadow it with an empty one (the operator then puts that schema first in
// the search_path, or moves the tables).
func TestOpenNeverShadowsAStoreLaterOnTheSearchPathWithANewOne(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	held := schemaOf(t, pgtest.Schema(t))        // the schema the store has lived in
	first := "t_" + strings.ToLower(rand.Text()) // the role's schema, not there yet
	u := pgtest.WithParams(t, pgtest.ServerURL(t), url.Values{"search_path": {first + "," + held}})

	s, err := pgstore.Open(ctx, u, pgstore.WithClock(pgstore.CallerClock))
	is.NoErr(err)
	now := base
	is.NoErr(enqueueRows(ctx, s, turnframe.NewIDGenerator(), "acme", "pay-1", now, turnframe.OutboxMessage{Destination: "d"}))
	s.Close()

	// The DBA creates the first schema of the path.
	admin, err := pgx.Connect(ctx, pgtest.ServerURL(t))
	is.NoErr(err)
	defer admin.Close(ctx)
	_, err = admin.Exec(ctx, "CREATE SCHEMA "+first)
	is.NoErr(err)
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP SCHEMA "+first+" CASCADE") })

	again, err := pgstore.Open(ctx, u, pgstore.WithClock(pgstore.CallerClock))
	if err == nil {
		defer again.Close()
		rows, lerr := again.ListOutbox(ctx, turnframe.OutboxFilter{Limit: 10})
		is.NoErr(lerr)
		t.Logf("reopened: %d outbox rows", len(rows))
		is.Equal(len(rows), 1) // the store still has its row (it opened a new, empty one)
		return
	}
	t.Logf("reopened: %v", err)
	is.True(errors.Is(err, turnframe.ErrInvalid)) // refused: an operator's mistake to mend
	is.True(strings.Contains(err.Error(), held))  // naming the schema that holds the store
	var tables int
	is.NoErr(admin.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = $1`, first).Scan(&tables))
	is.Equal(tables, 0) // and nothing was created in the new schema
}
