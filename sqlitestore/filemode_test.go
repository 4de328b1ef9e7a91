//go:build unix

package sqlitestore_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

// modeOf returns path's permission bits.
func modeOf(t *testing.T, path string) fs.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("stat %s: %v", path, err)
	}
	return fi.Mode().Perm()
}

// writeOnce opens path with opts, commits one turn (so the WAL and the
// shared-memory file exist) and returns the store, open.
func writeOnce(t *testing.T, path string, opts ...sqlitestore.Option) *sqlitestore.Store {
	t.Helper()
	ctx := context.Background()
	s, err := sqlitestore.Open(ctx, path, opts...)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	rt := turnframe.New(s)
	if _, err := rt.Receive(ctx, "acme", rt.NewConversationID(), "my card is 4242"); err != nil {
		t.Fatalf("receive: %v", err)
	}
	return s
}

// The file holds users' messages and payloads: a new one, and the -wal and
// -shm files SQLite makes beside it, are the owner's alone unless the app
// says otherwise; a file that exists keeps the mode it has.
func TestOpenCreatesThePrivateFile(t *testing.T) {
	old := syscall.Umask(0o022) // the usual umask, whatever the runner's
	defer syscall.Umask(old)
	for _, tc := range []struct {
		name     string
		existing fs.FileMode // 0: no file before Open
		opts     []sqlitestore.Option
		want     fs.FileMode
	}{
		{name: "ANewFileIsOwnerOnly", want: 0o600},
		{name: "AZeroModeKeepsTheDefault", opts: []sqlitestore.Option{sqlitestore.WithFileMode(0)}, want: 0o600},
		{name: "TheAppChoosesAnotherMode", opts: []sqlitestore.Option{sqlitestore.WithFileMode(0o640)}, want: 0o640},
		{name: "AnExistingFileKeepsItsMode", existing: 0o644, want: 0o644},
		{name: "AnExistingPrivateFileStaysPrivate", existing: 0o600, opts: []sqlitestore.Option{sqlitestore.WithFileMode(0o644)}, want: 0o600},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			path := filepath.Join(t.TempDir(), "app.db")
			if tc.existing != 0 {
				is.NoErr(os.WriteFile(path, nil, tc.existing)) // an empty file is a new SQLite database
				is.NoErr(os.Chmod(path, tc.existing))
			}
			writeOnce(t, path, tc.opts...)
			for _, p := range []string{path, path + "-wal", path + "-shm"} {
				is.Equal(modeOf(t, p), tc.want) // the database and its companions
			}
		})
	}
}
