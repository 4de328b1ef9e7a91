package sqlitestore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/schema"
	"github.com/turnframe/turnframe/sqlitestore"
)

// migrationFiles are the embedded migrations by version, for a test that
// applies them by hand as another process's goose would.
var migrationFiles = map[int64]string{
	2: "00002_leases_and_unique_keys.sql",
	3: "00003_needs_intervention_and_history.sql",
	4: "00004_awaiting_approval.sql",
	5: "00005_inbox_message_ids.sql",
	6: "00006_outbox_trace_context.sql",
	7: "00007_outbox_uncertain_indexes.sql",
}

// Two instances of an upgraded application start together on a big file
// some versions behind: the first migrates it, each migration a long
// transaction (00004 copies the journal), and the second, which listed the
// same migrations, waits for the write lock, longer than its busy timeout
// each time, and runs again, each migration it finds committed meanwhile
// failing as run twice. Open used to give up after eight failed tries in
// all, whatever the first instance had done meanwhile: the second instance
// failed to start while the first was making progress, with ErrBusy, or,
// when its last try was a migration the first had just committed, with
// ErrInvalid, "does another application keep tables of the same names in
// it?". It now waits as long as the file's version moves.
//
// The first instance is played by hand on a connection of the test's own:
// it holds the write lock for three of the second's busy timeouts per
// migration (the time its migration takes on a big file, not a wait for
// anything), then applies the migration as goose does and commits, until
// the file is current; it reads the version under the lock, so a migration
// the second instance applied in a gap is not applied again.
func TestAnOpenWaitsForAnotherProcessThatKeepsMigratingTheFile(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v1.db")
	db := createAtVersion(t, path, 1)
	newV1Fixture().write(t, db)
	is.NoErr(db.Close())

	const busy = 50 * time.Millisecond
	first, err := sql.Open("sqlite", "file:"+path+"?_txlock=immediate&_pragma=busy_timeout(60000)")
	is.NoErr(err)
	defer first.Close()
	first.SetMaxOpenConns(1)
	tx, err := first.BeginTx(ctx, nil)
	is.NoErr(err) // the first instance starts migrating

	opened := make(chan error, 1)
	go func() {
		s, err := sqlitestore.Open(ctx, path, sqlitestore.WithBusyTimeout(busy))
		if err == nil {
			err = s.Close()
		}
		opened <- err
	}()
	waitFor(t, "the second instance to list the migrations and wait for the write lock", func() bool {
		return goroutinesIn("goose/v3.beginTx") == 1
	})

	for {
		v, err := schema.FileVersion(ctx, tx)
		is.NoErr(err)
		if v == schema.Version {
			is.NoErr(tx.Rollback())
			break
		}
		<-time.After(3 * busy) // the migration's own time on a big file
		_, err = tx.ExecContext(ctx, upSQL(t, migrationFiles[v+1]))
		is.NoErr(err)
		_, err = tx.ExecContext(ctx, `INSERT INTO goose_db_version (version_id, is_applied) VALUES (?, 1)`, v+1)
		is.NoErr(err)
		is.NoErr(tx.Commit())
		tx, err = first.BeginTx(ctx, nil)
		is.NoErr(err) // the next migration (or, the second instance having taken the lock, after it)
	}

	select {
	case err := <-opened:
		is.NoErr(err) // the second instance opens once the first is done
	case <-time.After(safetyNet):
		t.Fatal("the second Open still blocked")
	}
	check, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	is.NoErr(err)
	defer check.Close()
	isCurrent(t, check)
	isIntact(t, check)
	got := queryStrings(t, check, `SELECT version_id || ' x' || count(*) FROM goose_db_version WHERE version_id > 1 GROUP BY version_id ORDER BY version_id`)
	want := []string{}
	for v := int64(2); v <= schema.Version; v++ {
		want = append(want, fmt.Sprintf("%d x1", v))
	}
	is.Equal(got, want) // each migration applied once
}

// An Open whose wait for the write lock outlasts its busy timeout again and
// again while the file's version stays where it was gives up, ErrBusy, and
// says so: at which version the file stayed, and that another process may be
// migrating it. It used to say only that another connection held the lock.
func TestAnOpenBehindALockThatNeverMovesIsBusyAndSaysWhy(t *testing.T) {
	is := is.New(t)
	path := filepath.Join(t.TempDir(), "v3.db")
	db := createAtVersion(t, path, 3)
	newV3Fixture().write(t, db)
	is.NoErr(db.Close())
	holdWriteLock(t, path) // another process's migration that never ends

	s, err := sqlitestore.Open(context.Background(), path, sqlitestore.WithBusyTimeout(time.Millisecond))
	if err == nil {
		s.Close()
	}
	t.Log(err)
	is.True(errors.Is(err, turnframe.ErrBusy))                             // the same Open may succeed later
	is.True(!errors.Is(err, turnframe.ErrInvalid))                         // nothing is wrong with the file
	is.True(strings.Contains(err.Error(), "stayed at schema version 3"))   // where the file is
	is.True(strings.Contains(err.Error(), "another process migrating it")) // what may hold it
}
