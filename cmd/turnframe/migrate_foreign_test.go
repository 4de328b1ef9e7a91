package main

import (
	"database/sql"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// sqliteShape is what a file holds, as another application would see it:
// its tables, indexes and triggers by name, and its journal mode.
func sqliteShape(t *testing.T, path string) string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("SELECT type || ' ' || name FROM sqlite_master ORDER BY 1")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	rows.Close()
	var mode string
	if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	return strings.Join(append(names, "journal_mode "+mode), ", ")
}

// otherAppFile writes a SQLite file of another application with ddl.
func otherAppFile(t *testing.T, ddl string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "other.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ddl); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// 'turnframe migrate --db' pointed, by a slip, at another application's
// SQLite file, one of whose tables is named like one of turnframe's. It is
// refused (exit 2, "does another application keep tables of the same
// names in it?") — after it has written into that file: goose's version
// table, turnframe's turns, journal, events and outbox tables when the clash
// is in a later migration (here "history", migration 3), and WAL journal
// mode, which the other application never chose. A refusal leaves the file
// as it was.
func TestMigrateRefusingAnotherApplicationsFileLeavesItUnchanged(t *testing.T) {
	for _, c := range []struct{ name, ddl string }{
		{"ClashInTheFirstMigration", "CREATE TABLE events (at TEXT, what TEXT); INSERT INTO events VALUES ('today', 'lunch')"},
		{"ClashInALaterMigration", "CREATE TABLE history (at TEXT, what TEXT); INSERT INTO history VALUES ('1066', 'Hastings')"},
	} {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			path := otherAppFile(t, c.ddl)
			before := sqliteShape(t, path)
			code, _, stderr := cli(t, "migrate", "--db", path)
			after := sqliteShape(t, path)
			t.Logf("exit %d: %s\nbefore: %s\nafter:  %s", code, strings.TrimSpace(stderr), before, after)
			is.Equal(code, exitUsage) // refused: cannot succeed as given
			is.Equal(after, before)   // and the other application's file is as it was
		})
	}
}

// A SQLite file whose table goose_db_version is another program's (goose
// is a common migration tool; or a half-copied file) can never be read as
// a turnframe database. status, settle and prune refuse it with exit 2;
// migrate and version exited 1, "could not be done now (busy, I/O)",
// inviting a retry for ever.
func TestAForeignVersionTableExitsTwoForEveryCommand(t *testing.T) {
	path := otherAppFile(t, "CREATE TABLE goose_db_version (tool TEXT, applied TEXT); INSERT INTO goose_db_version VALUES ('mine', 'yes')")
	for _, args := range [][]string{{"status"}, {"migrate"}, {"version"}} {
		t.Run(args[0], func(t *testing.T) {
			is := is.New(t)
			code, _, stderr := cli(t, append(slices.Clone(args), "--db", path)...)
			t.Logf("exit %d: %s", code, strings.TrimSpace(stderr))
			is.Equal(code, exitUsage) // cannot succeed as given, however often it is tried
		})
	}
}

// migrate's check for another application's objects reads the names
// turnframe's migrations create from their SQL: it knows every object a
// migrated file holds, or a clash on one it missed would again be found
// only half way through the migrations.
func TestTheSchemaNamesAreEveryObjectAMigratedFileHolds(t *testing.T) {
	is := is.New(t)
	path := filepath.Join(t.TempDir(), "turnframe.db")
	code, _, stderr := cli(t, "migrate", "--db", path)
	is.Equal(code, 0) // migrated
	db, err := sql.Open("sqlite", "file:"+path)
	is.NoErr(err)
	defer db.Close()
	rows, err := db.Query("SELECT name FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%' AND name <> 'goose_db_version'")
	is.NoErr(err)
	defer rows.Close()
	n := 0
	for rows.Next() {
		var name string
		is.NoErr(rows.Scan(&name))
		is.True(schemaNames()[strings.ToLower(name)]) // a migrated file's object the check knows
		n++
	}
	is.NoErr(rows.Err())
	t.Logf("%d objects, %d names known; %s", n, len(schemaNames()), strings.TrimSpace(stderr))
	is.True(n > 10) // the file holds turnframe's tables and indexes
}
