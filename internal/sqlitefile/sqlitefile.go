// Package sqlitefile hands tests a SQLite store file already at the
// current schema, so that a test which opens hundreds of stores does not
// run every migration for each of them (under the race detector, goose
// applying the migrations was half of what the conformance suite spent).
//
// A test binary that uses it calls Main from its TestMain: Main opens one
// store with sqlitestore.Open, which creates and migrates the template,
// closes it, runs the tests and removes the template. Path copies the
// template into the test's own temporary directory. A store opened on the
// copy is a store sqlitestore.Open made, not one this package assembled;
// what Open does for a new file (creating it, its mode, each migration) is
// sqlitestore's own tests' business, and they open new files.
package sqlitefile

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/turnframe/turnframe/sqlitestore"
)

// template is the migrated file's path, set by Main before any test runs
// and read-only while they run.
var template string

// Main creates the template file, runs the tests and removes the file; it
// returns m.Run's exit code (or 1 when the template cannot be made), for
// TestMain to pass to os.Exit.
func Main(m *testing.M) int {
	dir, err := os.MkdirTemp("", "turnframe-template-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "sqlitefile: temp dir:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "turnframe.db")
	s, err := sqlitestore.Open(context.Background(), path)
	if err == nil {
		err = s.Close() // a clean close checkpoints the WAL into the file
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sqlitefile: the template store:", err)
		return 1
	}
	template = path
	return m.Run()
}

// Path returns the path of a new file, in tb's temporary directory, holding
// an empty store at the current schema (owner-only, as Open creates it). It
// fails tb when Main did not run or the copy fails.
func Path(tb testing.TB) string {
	tb.Helper()
	if template == "" {
		tb.Fatal("sqlitefile: call sqlitefile.Main from the package's TestMain")
	}
	path := filepath.Join(tb.TempDir(), "turnframe.db")
	if err := copyFile(path, template); err != nil {
		tb.Fatalf("sqlitefile: %v", err)
	}
	return path
}

// copyFile copies src to a new owner-only file dst.
func copyFile(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
