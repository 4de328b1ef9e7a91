package main

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"
)

// 'turnframe migrate --db postgres://…' pointed at a schema where another
// application keeps a table named like one of turnframe's: a migration
// fails ("relation … already exists", SQLSTATE 42P07) every time it is
// tried. migrate exited 1, "could not be done now (busy, I/O)", inviting a
// retry for ever, as it once did on SQLite
// (TestMigrateOfAnotherApplicationsFileIsRefusedWithExitTwo); and every
// other command then tells the operator to run migrate again.
func TestPGMigrateOfAnotherApplicationsSchemaIsRefusedWithExitTwo(t *testing.T) {
	for _, table := range []string{"turns", "history"} { // the first migration's table, and a later one's
		t.Run(table, func(t *testing.T) {
			is := is.New(t)
			db := pgSchema(t)
			ctx := context.Background()
			conn, err := pgx.Connect(ctx, db)
			is.NoErr(err)
			_, err = conn.Exec(ctx, "CREATE TABLE "+table+" (player text, score int)")
			is.NoErr(err)
			is.NoErr(conn.Close(ctx))
			code, _, stderr := cli(t, "migrate", "--db", db)
			t.Logf("exit %d: %s", code, strings.TrimSpace(stderr))
			is.Equal(code, exitUsage)                                // cannot succeed as given, however often it is tried
			is.True(strings.Contains(stderr, table))                 // names the table in the way
			is.True(strings.Contains(stderr, "another application")) // and says what it likely is
		})
	}
}
