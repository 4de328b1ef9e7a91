package sqlitestore_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
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

// A file this process may not write (its directory writable): SQLite
// opens it read-only without a word. The store reads it (the CLI's status
// of a backup an operator may only read), and a write fails at once with
// an error that says why, not ErrBusy (no retry mends it): it was the
// driver's bare "attempt to write a readonly database". Open does not
// probe the file itself: closing a descriptor of its own on the file
// would drop the locks SQLite holds on it for another store of the
// process.
func TestAFileItCannotWriteIsReadAndRefusesWrites(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "turnframe.db")
	s, err := sqlitestore.Open(ctx, path)
	is.NoErr(err)
	is.NoErr(s.Close())
	makeReadOnly(t, path)
	s, err = sqlitestore.Open(ctx, path, sqlitestore.WithExisting())
	is.NoErr(err) // read-only is enough to read
	defer s.Close()
	_, err = s.ListUnfinishedTurns(ctx, turnframe.RecoveryScope{}, 10)
	is.NoErr(err) // reads work
	ids := turnframe.NewIDGenerator()
	now := time.Now()
	turn := ids.TurnID(now)
	_, err = s.Apply(ctx, turnframe.Write{Account: "acme", Turn: turn, Now: now,
		Begin: &turnframe.StoredTurn{Account: "acme", ID: turn, Conversation: ids.ConversationID(now), Text: "hi"}})
	is.True(err != nil)                                 // refused
	is.True(!errors.Is(err, turnframe.ErrBusy))         // not "try again"
	is.True(strings.Contains(err.Error(), "read-only")) // and says why
}
