package main

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/matryer/is"
)

// fullDisk is a stdout that takes nothing: a redirect onto a full disk
// (/dev/full), a pipe whose reader went away.
type fullDisk struct{}

func (fullDisk) Write([]byte) (int, error) { return 0, errors.New("no space left on device") }

// A listing whose output could not be written failed: exit 1, never 0 with
// nothing written ('turnframe approvals > list.txt' on a full disk left an
// empty file and said done when nothing awaited approval).
func TestAListingWhoseOutputCannotBeWrittenFails(t *testing.T) {
	f := mustFixture(t)
	for _, args := range [][]string{{"approvals"}, {"status"}, {"outbox"}, {"turns"}, {"history", f.unknown.String()}} {
		t.Run(args[0], func(t *testing.T) {
			is := is.New(t)
			var stderr bytes.Buffer
			code := run(context.Background(), append(args, "--db", f.path), fullDisk{}, &stderr)
			t.Log(stderr.String())
			is.Equal(code, exitFailure) // not done
		})
	}
}
