package sqlitestore_test

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// bulkBytes is how much payload the big old file holds: far more than a
// migration may keep in memory.
const bulkBytes = 48 << 20

// A file of schema 3 whose journal holds 48 MiB of payloads is migrated
// (00004 rebuilds the journal, every row copied) with the memory SQLite's
// page cache bounds, not with memory that grows with the file: the writer
// keeps every changed page in memory until COMMIT (cache_spill off) and
// sorts in memory (temp_store MEMORY), which is right for an application's
// transaction and wrong for a migration, whose one transaction can hold the
// whole file. A file of some gigabytes then needed as much memory again,
// and a process in a container with less was killed at every start.
//
// The test reads the process's peak resident memory (Linux: VmHWM, reset
// through /proc/self/clear_refs) around Open, and fails when Open's peak
// grew by half the payload or more.
func TestMigratingABigOldFileNeedsMemoryBoundedByTheCacheNotTheFile(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads the peak resident memory from /proc")
	}
	is := is.New(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v3.db")
	f := newV3Fixture()
	db := createAtVersion(t, path, 3)
	f.write(t, db)
	const row = 64 << 10
	_, err := db.ExecContext(ctx, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
		INSERT INTO journal (account, key, turn, case_key, name, payload, status, attempt, attempts, event_ids,
			code, remote_ref, admitted_at, updated_at)
		SELECT 'acme', 'bulk-' || i, ?, 'c', 'book', randomblob(?), 'committed', '', 0, '[]', '', '', 1, 1 FROM n`,
		bulkBytes/row, f.turns[0].ID.String(), row)
	is.NoErr(err) // the bulk rows
	is.NoErr(db.Close())

	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Skipf("cannot reset the peak resident memory: %v", err)
	}
	before := peakRSS(t)
	s := mustOpenPath(t, path)
	grew := peakRSS(t) - before
	t.Logf("Open's peak resident memory grew by %d KiB for %d KiB of payload", grew>>10, bulkBytes>>10)
	is.True(grew < bulkBytes/2) // the migration's memory does not grow with the file

	var n int
	is.NoErr(s.ReadDB().QueryRowContext(ctx, `SELECT count(*) FROM journal WHERE key LIKE 'bulk-%'`).Scan(&n))
	is.Equal(n, bulkBytes/row) // every row kept
	isCurrent(t, s.ReadDB())
}

// peakRSS returns the process's peak resident memory in bytes (VmHWM).
func peakRSS(t *testing.T) int {
	t.Helper()
	file, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/self/status")
	return 0
}
