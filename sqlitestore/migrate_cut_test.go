package sqlitestore_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/schema"
	"github.com/turnframe/turnframe/sqlitestore"
)

// Open on a schema-4 file whose outbox holds many rows of unknown outcome:
// migrations 00005 and 00006 change little and commit, and 00007, whose
// index of those rows takes more than the file system lets the WAL grow
// (RLIMIT_FSIZE, in a child process), fails, every try. Open then must not
// say ErrBusy, "nothing was written": it moved the file to schema 6. The
// error names the migrations this Open applied.
func TestOpenCutMidMigrationsIsNotBusyAfterWriting(t *testing.T) {
	if !inDiskFullChild(t, "TURNFRAME_TEST_MIGRATE_CUT_CHILD") {
		return
	}
	is := is.New(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v4.db")
	f := newV4Fixture()
	db := createAtVersion(t, path, 4)
	f.write(t, db)
	_, err := db.ExecContext(ctx, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 60000)
		INSERT INTO outbox (id, account, turn, key, destination, payload, order_key, status, attempts, due_at,
			claimed_by, claimed_at, last_code, remote_ref, created_at, updated_at, finished_at)
		SELECT printf('%026d', i), 'acme', ?, 'bulk-' || i, 'payments', NULL, '', 'outcome_unknown', 1, 1,
			'w', 1, '', '', 1, 1, 0 FROM n`, f.turns[0].ID.String())
	is.NoErr(err) // rows for 00007's index
	is.NoErr(db.Close())

	disk := newDiskLimit(t)
	is.NoErr(syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: 256 << 10, Max: disk.free.Max}))
	s, err := sqlitestore.Open(ctx, path)
	if err == nil {
		s.Close()
	}
	disk.unfill()

	check, err2 := sql.Open("sqlite", "file:"+path+"?mode=ro")
	is.NoErr(err2)
	defer check.Close()
	v, err2 := schema.FileVersion(ctx, check)
	is.NoErr(err2)
	t.Logf("Open: %v; the file is now at schema %d (was 4)", err, v)
	is.True(err != nil)                                                      // 00007 did not fit
	is.Equal(v, int64(6))                                                    // 00005 and 00006 committed
	is.True(!errors.Is(err, turnframe.ErrBusy))                              // not "nothing was written"
	is.True(!strings.Contains(err.Error(), "nothing was written"))           // nor in words
	is.True(strings.Contains(err.Error(), "migrations 5 to 6 were applied")) // what it did
}
