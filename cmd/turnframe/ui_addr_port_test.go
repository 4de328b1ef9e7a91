package main

import (
	"strings"
	"testing"

	"github.com/matryer/is"
)

// TestUIRefusesAPortNoListenerTakesAsAUsageError: --addr 127.0.0.1:99999
// passed the command's look at the address, opened the file and failed at
// net.Listen, exit 1, as if the machine had failed; it is the command
// line's mistake, exit 2, before the file is opened.
func TestUIRefusesAPortNoListenerTakesAsAUsageError(t *testing.T) {
	f := mustFixture(t)
	for _, addr := range []string{"127.0.0.1:99999", "127.0.0.1:65536", "127.0.0.1:-1", "localhost:no-such-service", "[::1]:1e3"} {
		t.Run(addr, func(t *testing.T) {
			is := is.New(t)
			code, stdout, stderr := cli(t, "ui", "--db", f.path, "--addr", addr)
			is.Equal(code, exitUsage)                          // a usage error
			is.True(strings.Contains(stderr, "is not a port")) // says which part
			is.Equal(stdout, "")                               // nothing served
		})
	}
}
