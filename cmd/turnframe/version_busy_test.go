package main

import (
	"strings"
	"testing"

	"github.com/matryer/is"
)

// TestVersionRefusesABusyTimeoutEveryOtherCommandRefuses: every command
// that opens a database refuses a --busy-timeout under a millisecond (exit
// 2), which SQLite would take as no wait at all; version, which reads the
// file's schema with it, took -5s and 1ns and exited 0.
func TestVersionRefusesABusyTimeoutEveryOtherCommandRefuses(t *testing.T) {
	f := mustFixture(t)
	for _, busy := range []string{"0", "1ns", "999us", "-5s"} {
		t.Run(busy, func(t *testing.T) {
			is := is.New(t)
			code, stdout, stderr := cli(t, "version", "--db", f.path, "--busy-timeout", busy)
			is.Equal(code, exitUsage)                                                // as status and migrate do
			is.True(strings.Contains(stderr, "--busy-timeout must be at least 1ms")) // says why
			is.Equal(stdout, "")                                                     // nothing printed as if read
		})
	}
	t.Run("WithoutADatabaseItIsNotRead", func(t *testing.T) {
		is := is.New(t)
		code, _, _ := cli(t, "version", "--busy-timeout", "0")
		is.Equal(code, exitOK) // no database, no wait to bound
	})
}
