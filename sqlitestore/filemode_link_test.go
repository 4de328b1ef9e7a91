//go:build unix

package sqlitestore_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/matryer/is"
)

// The database path is a symbolic link to where the file is to be (a
// deployment that links the app's path to a data volume, say) and the file
// does not exist yet. Open creates it: it must be owner-only, as every new
// file Open creates. O_EXCL refuses to follow the link (EEXIST), which
// createPrivate used to take for "the file exists", leaving the creation to
// SQLite and its 0644: found by an outside attack.
func TestANewFileBehindASymlinkIsOwnerOnly(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	is := is.New(t)
	dir := t.TempDir()
	target := filepath.Join(dir, "volume", "app.db")
	is.NoErr(os.MkdirAll(filepath.Dir(target), 0o700))
	link := filepath.Join(dir, "app.db")
	is.NoErr(os.Symlink(target, link)) // dangling: the file does not exist yet

	writeOnce(t, link)
	for _, p := range []string{target, target + "-wal", target + "-shm"} {
		is.Equal(modeOf(t, p).String(), "-rw-------") // the new file and its companions are the owner's alone
	}
}
