package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// TestTheDemoRefusesASendTimeoutItWouldHangFor: one of the demo's charges
// hangs until its send times out, on the real clock, so a --send-timeout
// of hours (or 2562047h, the most a duration holds) held the demo that
// long. It is a usage error now, before anything is written. The context
// is cancelled, so that without the bound the demo starts, fails on the
// context and exits 1 rather than hanging the test.
func TestTheDemoRefusesASendTimeoutItWouldHangFor(t *testing.T) {
	for _, timeout := range []string{"1m1s", "24h", "2562047h"} {
		t.Run(timeout, func(t *testing.T) {
			is := is.New(t)
			path := filepath.Join(t.TempDir(), "demo.db")
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			var out, errb bytes.Buffer
			code := run(ctx, []string{"demo", "--db", path, "--send-timeout", timeout}, &out, &errb)
			is.Equal(code, exitUsage)                                                       // a usage error
			is.True(strings.Contains(errb.String(), "--send-timeout must be at most 1m0s")) // says the bound
			_, err := os.Stat(path)
			is.True(os.IsNotExist(err)) // nothing written
		})
	}
	t.Run("AMinuteIsAccepted", func(t *testing.T) {
		is := is.New(t)
		path := filepath.Join(t.TempDir(), "demo.db")
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		var out, errb bytes.Buffer
		code := run(ctx, []string{"demo", "--db", path, "--send-timeout", "1m"}, &out, &errb)
		is.True(code != exitUsage) // the bound itself is no usage error (the cancelled demo fails otherwise)
	})
}
