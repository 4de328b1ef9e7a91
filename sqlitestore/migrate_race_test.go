package sqlitestore_test

import (
	"bytes"
	"context"
	"database/sql"
	"io/fs"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/schema"
	"github.com/turnframe/turnframe/sqlitestore"
)

// goroutinesIn counts the goroutines whose stack holds frame.
func goroutinesIn(frame string) int {
	buf := make([]byte, 1<<22)
	n := runtime.Stack(buf, true)
	return bytes.Count(buf[:n], []byte(frame))
}

// holdWriteLock opens its own connection on path and takes the file's write
// lock (BEGIN IMMEDIATE) until the returned transaction ends.
func holdWriteLock(t *testing.T, path string) *sql.Tx {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(1)
	tx, err := db.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback() })
	return tx
}

// Two processes (two Stores) open a file an earlier version wrote, at the
// same time, as happens when two instances of an upgraded application start
// together, or `turnframe migrate` runs while the application starts. Both
// read the file's version (3) before either migrates it, and then queue for
// the write lock. goose re-reads nothing inside a migration's transaction,
// so the second opener runs 00004 after the first committed it: it must
// fail (00004's guard), roll back, and leave each migration applied once.
// Found by an outside attack: 00004, a table rebuild, used to succeed again.
func TestConcurrentOpensOfAnOldFileApplyEachMigrationOnce(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v3.db")
	db := createAtVersion(t, path, 3)
	newV3Fixture().write(t, db)
	is.NoErr(db.Close())

	lock := holdWriteLock(t, path) // keeps both openers at their first migration

	type opened struct {
		s   *sqlitestore.Store
		err error
	}
	results := make(chan opened, 2)
	for range 2 {
		go func() {
			s, err := sqlitestore.Open(ctx, path, sqlitestore.WithBusyTimeout(time.Minute))
			results <- opened{s, err}
		}()
	}
	// Both have listed the file's migrations (version 3) and wait for the
	// write lock to apply 00004.
	waitFor(t, "both openers to wait for the write lock in goose", func() bool {
		return goroutinesIn("goose/v3.beginTx") == 2
	})
	is.NoErr(lock.Rollback())

	var stores []*sqlitestore.Store
	for range 2 {
		var r opened
		select {
		case r = <-results:
		case <-time.After(safetyNet):
			t.Fatal("Open still blocked")
		}
		is.NoErr(r.err) // both openers succeed
		t.Cleanup(func() { r.s.Close() })
		stores = append(stores, r.s)
	}
	got := queryStrings(t, stores[0].ReadDB(),
		`SELECT version_id || ' x' || count(*) FROM goose_db_version WHERE version_id > 3 GROUP BY version_id ORDER BY version_id`)
	is.Equal(got, []string{"4 x1", "5 x1", "6 x1", "7 x1"}) // each migration applied once
}

// upSQL returns the Up section of the embedded migration file name.
func upSQL(t *testing.T, name string) string {
	t.Helper()
	b, err := fs.ReadFile(schema.FS, "migrations/"+name)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	s = s[strings.Index(s, "-- +goose Up")+len("-- +goose Up"):]
	return s[:strings.Index(s, "-- +goose Down")]
}

// What a second run of 00004 did: process A migrates an old file and its
// application admits a command that needs approval; process B, which read
// the file's version before A migrated it and was waiting for the write
// lock, then ran 00004 again, which copied journal with needs_approval = 0
// for every row: the entry lost NeedsApproval, and planning the same
// command again was refused as a key reused for another command. Now B's
// run fails on the guard and B finds the file current.
//
// A's work (what goose applies for 00004–00006 and the application's
// Apply) is written here by hand in the one transaction that holds the
// write lock, so that B runs 00004 after it deterministically; with two
// real Opens the same interleaving happens whenever B's busy handler sleeps
// through A's migrations and first writes.
func TestAStaleMigrationRunNeverErasesWhatAnotherProcessWrote(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v3.db")
	db := createAtVersion(t, path, 3)
	f := newV3Fixture()
	f.write(t, db)
	is.NoErr(db.Close())
	executing := f.turns[1].ID // an Executing turn of acme

	a := holdWriteLock(t, path) // process A, migrating

	opened := make(chan error, 1)
	var b *sqlitestore.Store
	go func() {
		var err error
		b, err = sqlitestore.Open(ctx, path, sqlitestore.WithBusyTimeout(time.Minute))
		opened <- err
	}()
	waitFor(t, "B to have read version 3 and to wait for the write lock", func() bool {
		return goroutinesIn("goose/v3.beginTx") == 1
	})

	// A applies 00004, 00005 and 00006 as goose does, each with its version
	// row, and its application admits a command that needs approval.
	for v, name := range map[int]string{4: "00004_awaiting_approval.sql", 5: "00005_inbox_message_ids.sql", 6: "00006_outbox_trace_context.sql"} {
		_, err := a.ExecContext(ctx, upSQL(t, name))
		is.NoErr(err)
		_, err = a.ExecContext(ctx, `INSERT INTO goose_db_version (version_id, is_applied) VALUES (?, 1)`, v)
		is.NoErr(err)
	}
	_, err := a.ExecContext(ctx, `INSERT INTO journal (account, key, turn, case_key, name, payload, status, attempt, attempts,
		event_ids, code, remote_ref, admitted_at, updated_at, lease_until, needs_approval)
		VALUES ('acme', 'pay', ?, 'card/1', 'pay', NULL, 'awaiting_approval', '', 0, '[]', '', '', ?, ?, 0, 1)`,
		executing.String(), t0.UnixMicro(), t0.UnixMicro())
	is.NoErr(err)
	is.NoErr(a.Commit())

	select {
	case err := <-opened:
		is.NoErr(err) // B opens
	case <-time.After(safetyNet):
		t.Fatal("B's Open still blocked")
	}
	t.Cleanup(func() { b.Close() })

	e, err := b.ByKey(ctx, "acme", "pay")
	is.NoErr(err)
	is.Equal(e.Status, turnframe.JournalAwaitingApproval)
	is.True(e.NeedsApproval) // still the command A's application admitted

	// The turn plans the same command again (after a crash, say).
	pay := turnframe.Command{Key: "pay", Case: "card/1", Name: "pay", NeedsApproval: true}
	_, err = b.Apply(ctx, turnframe.Write{Account: "acme", Turn: executing, Now: t0.Add(time.Hour), Admit: []turnframe.Command{pay}})
	is.NoErr(err) // the same command, re-admitted
}
