//go:build unix

package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/matryer/is"
)

// An operator's --db that names a named pipe (a FIFO, or a process
// substitution's /dev/fd/N) is not a database file. Every command refuses it
// at once, exit 2, and never opens it for reading: an open of a FIFO nobody
// writes to blocks the process in the kernel, where neither the context nor
// Ctrl-C (caught by the command) ends it.
func TestANamedPipeIsRefusedAndNeverWaitedOn(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "app.db")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	for _, args := range [][]string{
		{"status"}, {"outbox"}, {"version"}, {"migrate"}, {"settle", "01J9Z3K8Q5R6S7T8V9W0X1Y2Z3", "completed"},
	} {
		t.Run(args[0], func(t *testing.T) {
			is := is.New(t)
			type result struct {
				code   int
				stderr string
			}
			done := make(chan result, 1)
			go func() {
				code, _, stderr := cli(t, append(args, "--db", fifo)...)
				done <- result{code, stderr}
			}()
			var r result
			select {
			case r = <-done:
			case <-time.After(20 * time.Second): // a hang guard, not a measurement
				// Give the blocked open its writer, so the command ends, then fail.
				if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
					w.Close()
				}
				<-done
				t.Fatalf("turnframe %s --db FIFO blocked opening the pipe for reading", args[0])
			}
			is.Equal(r.code, exitUsage)                               // it cannot succeed as given
			is.True(strings.Contains(r.stderr, "not a regular file")) // it says what is wrong
		})
	}
}
