package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// 'turnframe version --db FILE' interrupted while it reads the file's
// schema version (Ctrl-C while the application holds the file locked, or
// any read that fails for a reason of the moment) could not read it: it
// says so and exits 1, as every other command does. It called the file "not
// a turnframe database", which sends the operator after the wrong file or a
// damaged one.
func TestAnInterruptedVersionNeverCallsTheFileNotATurnframeDatabase(t *testing.T) {
	is := is.New(t)
	f := mustFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // Ctrl-C
	var out, stderr bytes.Buffer
	code := run(ctx, []string{"version", "--db", f.path}, &out, &stderr)
	t.Log(stderr.String())
	is.Equal(code, exitFailure)                                                // it may work later
	is.True(!strings.Contains(stderr.String(), "is not a turnframe database")) // it is one
	is.True(strings.Contains(stderr.String(), "context canceled"))             // it says why it stopped
}
