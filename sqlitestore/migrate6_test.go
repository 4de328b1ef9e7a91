package sqlitestore_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// A file a turnframe at schema version 5 wrote (the version 4 fixture:
// version 5 only added a column no row of it fills) opens: migration 00006
// adds the column trace_context to outbox, ” for every row it holds, and
// keeps every row, column, index and table definition; the file passes
// SQLite's integrity and foreign key checks. A row's trace context is then
// kept and handed to its claim, and the column refuses more than
// MaxTraceContextLen bytes. Down takes the column away and keeps every row.
func TestOpenMigratesAVersion5File(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v5.db")
	f := newV4Fixture()
	db := createAtVersion(t, path, 5)
	f.write(t, db)
	const rowsSQL = `SELECT seq || ' ' || id || ' ' || status || ' ' || held FROM outbox ORDER BY seq`
	const definitionsSQL = `SELECT name || ' ' || coalesce(sql, '') FROM sqlite_schema WHERE name <> 'outbox' AND ` + notUncertainIndex + ` ORDER BY name` // 00007's indexes: migrate7_test.go
	columns := tableInfo(t, db, "outbox")
	rows := queryStrings(t, db, rowsSQL)
	definitions := queryStrings(t, db, definitionsSQL)
	is.New(t).NoErr(db.Close())

	s := mustOpenPath(t, path)
	read := s.ReadDB()

	t.Run("SchemaIsCurrent", func(t *testing.T) { isCurrent(t, read) })
	t.Run("EveryRowReadsBackWithoutATraceContext", func(t *testing.T) {
		is := is.New(t)
		all, err := s.ListOutbox(ctx, turnframe.OutboxFilter{Limit: 100})
		is.NoErr(err)
		is.Equal(all, f.rows) // every row as it was, TraceContext ""
		is.Equal(queryStrings(t, read, rowsSQL), rows)
	})
	t.Run("OneColumnIsAddedAndEverythingElseKept", func(t *testing.T) {
		is := is.New(t)
		after := tableInfo(t, read, "outbox")
		is.Equal(after[:len(columns)], columns) // every column in its place
		is.Equal(after[len(columns):], []string{fmt.Sprintf("%d trace_context TEXT notnull=1 default='' pk=0 hidden=0", len(columns))})
		is.Equal(queryStrings(t, read, `SELECT count(*) FROM outbox WHERE trace_context <> ''`), []string{"0"})
		is.Equal(queryStrings(t, read, definitionsSQL), definitions) // every other table and index as it was
		var strict int
		is.NoErr(read.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_list WHERE strict AND name = 'outbox'`).Scan(&strict))
		is.Equal(strict, 1) // still STRICT
		isIntact(t, read)
	})
	t.Run("ATraceContextIsKeptAndClaimed", func(t *testing.T) {
		is := is.New(t)
		const tc = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		a := mustCommit(t, s, "acme", "traced", turnframe.OutboxMessage{Destination: "payments", TraceContext: tc})
		got, err := s.GetOutbox(ctx, a.Outbox[0].ID)
		is.NoErr(err)
		is.Equal(got.TraceContext, tc) // stored
		claims, err := s.ClaimDue(ctx, t0.Add(time.Hour), turnframe.MaxLimit, "w", time.Minute)
		is.NoErr(err)
		found := false
		for _, c := range claims {
			if c.ID == a.Outbox[0].ID {
				found = true
				is.Equal(c.TraceContext, tc) // handed to the claim
			}
		}
		is.True(found) // the new row was claimed
	})
	t.Run("TheColumnRefusesMoreThanTheBound", func(t *testing.T) {
		is := is.New(t)
		w := sqlitestoreWriter(t, path)
		tooLong := strings.Repeat("é", turnframe.MaxTraceContextLen/2) + "x" // 513 bytes, 257 characters
		_, err := w.ExecContext(ctx, `UPDATE outbox SET trace_context = ? WHERE seq = 1`, tooLong)
		is.True(err != nil) // the CHECK counts bytes
		_, err = w.ExecContext(ctx, `UPDATE outbox SET trace_context = ? WHERE seq = 1`, tooLong[:len(tooLong)-1])
		is.NoErr(err) // 512 bytes fit
		_, err = w.ExecContext(ctx, `UPDATE outbox SET trace_context = '' WHERE seq = 1`)
		is.NoErr(err)
	})
	t.Run("DownDropsTheColumnAndKeepsEveryRow", func(t *testing.T) {
		is := is.New(t)
		is.NoErr(s.Close())
		db := sqlitestoreWriter(t, path)
		is.NoErr(downTo(t, db, 5))
		is.Equal(tableInfo(t, db, "outbox"), columns)                                                     // as version 5 had it
		is.Equal(queryStrings(t, db, `SELECT count(*) FROM outbox`), []string{fmt.Sprint(len(rows) + 1)}) // every row kept
		is.Equal(queryStrings(t, db, definitionsSQL), definitions)
		is.Equal(queryStrings(t, db, `PRAGMA integrity_check`), []string{"ok"})
	})
}

// sqlitestoreWriter opens the file at path with database/sql alone, for a
// test that writes past the store, and closes it when the test ends.
func sqlitestoreWriter(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
