package main

import (
	"database/sql"
	"testing"

	_ "modernc.org/sqlite" // the "sqlite" driver, for a plain SQLite file
)

// mustPlainSQLite writes a SQLite database at path that is not turnframe's:
// one unrelated table, in rollback-journal mode, closed.
func mustPlainSQLite(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE TABLE recipes (name TEXT); INSERT INTO recipes VALUES ('risotto')"); err != nil {
		t.Fatal(err)
	}
}
