package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/schema"
	"github.com/turnframe/turnframe/sqlitestore"
)

// mustSchemaFile writes, in a new folder, a turnframe database whose schema
// is at version: the migrations of package schema applied up to version
// (as an older turnframe left it), or, for a version past schema.Version,
// the current schema with a later migration recorded (as a newer turnframe
// left it). wal puts the file in WAL mode, as the store keeps it.
func mustSchemaFile(t *testing.T, version int64, wal bool) string {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "app.db")
	if version > schema.Version {
		store, err := sqlitestore.Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Close(); err != nil {
			t.Fatal(err)
		}
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if version > schema.Version {
		if _, err := db.ExecContext(ctx, "INSERT INTO "+schema.VersionTable+" (version_id, is_applied) VALUES (?, 1)", version); err != nil {
			t.Fatal(err)
		}
	} else if err := schema.UpTo(ctx, db, version); err != nil {
		t.Fatal(err)
	}
	mode := "DELETE"
	if wal {
		mode = "WAL"
	}
	if _, err := db.ExecContext(ctx, "PRAGMA journal_mode = "+mode); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestSchemaVersions proves the "Also" of issue 12: no command but migrate
// changes a file's schema. A file at an older or a newer schema than the
// CLI's is refused by every other command, with exit 2 and what to do,
// and is left byte for byte as it was; migrate upgrades an older one.
func TestSchemaVersions(t *testing.T) {
	const id = "01J9Z3K8Q5R6S7T8V9W0X1Y2Z3"
	commands := [][]string{
		{"status"}, {"outbox"}, {"turns"}, {"turns", "--unfinished"}, {"show", id},
		{"settle", id, "completed"}, {"requeue", id}, {"release"}, {"release", "--force", id},
		{"prune", "--older-than", "1h"},
	}
	cases := []struct {
		name    string
		version int64
		wal     bool
		says    string // what every refusal says to do
		migrate int    // migrate's exit status
	}{
		{"OlderInWALMode", 1, true, "Run 'turnframe migrate --db", exitOK},
		{"OlderInRollbackMode", 1, false, "Run 'turnframe migrate --db", exitOK},
		{"Newer", schema.Version + 1, true, "written by a newer turnframe", exitUsage},
	}
	for _, tc := range cases {
		path := mustSchemaFile(t, tc.version, tc.wal)
		dir := filepath.Dir(path)
		for _, args := range commands {
			t.Run(tc.name+"_RefusedBy_"+strings.Join(args[:min(2, len(args))], "_"), func(t *testing.T) {
				is := is.New(t)
				before := snapshot(t, dir)
				code, stdout, stderr := cli(t, append(args, "--db", path)...)
				is.Equal(code, exitUsage)
				is.Equal(stdout, "")
				is.True(strings.Contains(stderr, tc.says))                                      // it says what to do
				is.True(strings.Contains(stderr, fmt.Sprintf("schema version %d", tc.version))) // and which version the file has
				is.True(!strings.Contains(stderr, "is not a turnframe database"))               // it is one, at another version
				is.Equal(snapshot(t, dir), before)                                              // not a byte changed, no file added
			})
		}
		t.Run(tc.name+"_VersionReportsIt", func(t *testing.T) {
			is := is.New(t)
			before := snapshot(t, dir)
			code, stdout, _ := cli(t, "version", "--db", path)
			is.Equal(code, exitOK)
			is.True(strings.Contains(stdout, fmt.Sprintf("file schema:  %d (", tc.version)))
			is.Equal(snapshot(t, dir), before) // read only
		})
		t.Run(tc.name+"_Migrate", func(t *testing.T) {
			is := is.New(t)
			before := snapshot(t, dir)
			code, stdout, stderr := cli(t, "migrate", "--db", path)
			is.Equal(code, tc.migrate)
			if tc.migrate != exitOK {
				is.True(strings.Contains(stderr, tc.says))
				is.Equal(snapshot(t, dir), before) // a newer file is never touched
				return
			}
			is.True(strings.Contains(stdout, fmt.Sprintf("schema version %d (was %d)", schema.Version, tc.version)))
			code, _, stderr = cli(t, "status", "--db", path)
			is.Equal(stderr, "")
			is.Equal(code, exitOK) // the upgraded file opens
		})
	}
}

// TestMigrateRefusesWhatIsNotSQLite proves issue 11, item 12 (its last
// part): migrate on a file that is not SQLite exits 2 with a clear message,
// like every other command, and leaves the file as it was.
func TestMigrateRefusesWhatIsNotSQLite(t *testing.T) {
	cases := []struct {
		name    string
		content string
	}{
		{"PlainText", "not a database\n"},
		{"AShortFile", "SQLite"},
		{"AlmostTheHeader", "SQLite format 4\x00 and then some more bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			dir := t.TempDir()
			path := filepath.Join(dir, "notes.db")
			is.NoErr(os.WriteFile(path, []byte(tc.content), 0o644))
			before := snapshot(t, dir)
			code, stdout, stderr := cli(t, "migrate", "--db", path)
			is.Equal(code, exitUsage)
			is.Equal(stdout, "")
			is.True(strings.Contains(stderr, path+" is not a SQLite database; migrate refused it and left it unchanged"))
			is.True(!strings.Contains(stderr, "file is not a database")) // not the driver's words
			is.Equal(snapshot(t, dir), before)                           // not a byte changed, no file added
		})
	}
	t.Run("ADirectory", func(t *testing.T) {
		is := is.New(t)
		dir := t.TempDir()
		code, _, stderr := cli(t, "migrate", "--db", dir)
		is.Equal(code, exitUsage)
		is.True(strings.Contains(stderr, "is a directory"))
	})
	t.Run("AnEmptyFileBecomesADatabase", func(t *testing.T) {
		is := is.New(t)
		path := filepath.Join(t.TempDir(), "empty.db")
		is.NoErr(os.WriteFile(path, nil, 0o644))
		code, stdout, _ := cli(t, "migrate", "--db", path)
		is.Equal(code, exitOK) // SQLite takes an empty file for an empty database
		is.True(strings.Contains(stdout, fmt.Sprintf("schema version %d (was 0)", schema.Version)))
	})
}

// migratePast records, as an upgraded application's Open does, a migration
// past this build's schema in the file at path.
func migratePast(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(context.Background(), "INSERT INTO "+schema.VersionTable+" (version_id, is_applied) VALUES (?, 1)", schema.Version+1); err != nil {
		t.Fatal(err)
	}
}

// 'turnframe ui' serves for as long as the operator leaves it running. The
// application is upgraded meanwhile and its Open migrates the file to a
// newer schema, which every one-shot command then refuses: the page refuses
// it too, on its next request — a button writes nothing with this build's
// older code, and a page is not drawn from a schema it does not know.
func TestTheUIRefusesToWriteIntoAFileMigratedPastIt(t *testing.T) {
	is := is.New(t)
	f := mustFixture(t)
	u := newTestUI(t, f, false)
	token := u.pageToken()

	migratePast(t, f.path)
	code, _, _ := cli(t, "status", "--db", f.path)
	is.Equal(code, exitUsage) // every operator command now refuses the file

	form := settleForm(token, f.unknown, "resend", "")
	form.Set("attempt", "1")
	code, body := u.post("/settle", form, nil)
	is.Equal(code, http.StatusServiceUnavailable)                 // refused…
	is.True(strings.Contains(body, "newer than this turnframe"))  // …saying why
	is.Equal(u.status(f.unknown), turnframe.OutboxOutcomeUnknown) // …and nothing written
	code, _ = u.post("/requeue", url.Values{"token": {token}, "id": {f.failed.String()}, "attempts": {"1"}}, nil)
	is.Equal(code, http.StatusServiceUnavailable)        // every write
	is.Equal(u.status(f.failed), turnframe.OutboxFailed) // unchanged
	code, body = u.get("/")
	is.Equal(code, http.StatusServiceUnavailable)                        // and every page
	is.True(strings.Contains(body, "start a turnframe at least as new")) // with what to do
	code, _ = u.get("/static/style.css")
	is.Equal(code, http.StatusOK) // the page's own assets are not the file's
}
