package sqlitestore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe/sqlitestore"
)

// locksOn counts the POSIX locks /proc/locks shows this process holding on
// the file at path.
func locksOn(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile("/proc/locks")
	if err != nil {
		t.Skipf("no /proc/locks here: %v", err)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := info.Sys().(*syscall.Stat_t)
	ino := fmt.Sprintf(":%d ", st.Ino)
	pid := fmt.Sprintf(" %d ", os.Getpid())
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, "POSIX") && strings.Contains(line, pid) && strings.Contains(line, ino) {
			n++
		}
	}
	return n
}

// Opening a file the store did not open through SQLite, and closing it,
// drops every POSIX lock the process holds on the file: those SQLite
// holds for a store already open on it too, which then looks unused to
// another process (that may checkpoint and delete the WAL under it). An
// Open of the same file in the same process, with or without
// WithExisting, leaves the first store's locks as they were.
func TestASecondOpenInTheProcessKeepsTheFirstStoresLocks(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []sqlitestore.Option
	}{
		{"Open", nil},
		{"WithExisting", []sqlitestore.Option{sqlitestore.WithExisting()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "turnframe.db")
			first, err := sqlitestore.Open(ctx, path)
			is.NoErr(err)
			defer first.Close()
			_, err = first.CaseRevision(ctx, "acme", "booking/1") // a read: its connection holds the file
			is.NoErr(err)
			before := locksOn(t, path)
			is.True(before > 0) // SQLite holds the file for the first store
			second, err := sqlitestore.Open(ctx, path, tc.opts...)
			is.NoErr(err)
			defer second.Close()
			is.True(locksOn(t, path) >= before) // none of the first store's locks dropped
		})
	}
}
