package sqlitestore_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe/sqlitestore"
)

// makeReadOnly makes the file alone read-only for this process, its
// directory staying writable (SQLite can make the -wal and -shm files
// beside it): an operator's chmod 0400, a file restored from a read-only
// backup. Permission bits do not stop root, so as root it marks the file
// immutable (chattr +i) until t ends.
func makeReadOnly(t *testing.T, file string) {
	t.Helper()
	if os.Geteuid() != 0 {
		if err := os.Chmod(file, 0o400); err != nil {
			t.Fatal(err)
		}
		return
	}
	if out, err := exec.Command("chattr", "+i", file).CombinedOutput(); err != nil {
		t.Skipf("root on a file system without chattr +i: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("chattr", "-i", file).CombinedOutput(); err != nil {
			t.Errorf("chattr -i: %v: %s", err, out)
		}
	})
}

// A store writes. SQLite opens a file it may not write read-only, without
// a word, so Open returned a store whose every write failed with the
// driver's "attempt to write a readonly database", which no sentinel
// wraps. Open refuses the file with the file system's error.
func TestOpenRefusesAFileItCannotWrite(t *testing.T) {
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
			s, err := sqlitestore.Open(ctx, path)
			is.NoErr(err)
			is.NoErr(s.Close())
			makeReadOnly(t, path)
			_, err = sqlitestore.Open(ctx, path, tc.opts...)
			is.True(err != nil)                       // refused at Open, not at the first write
			is.True(errors.Is(err, fs.ErrPermission)) // the file system's refusal
		})
	}
}
