package main

import (
	"context"
	"testing"
	"time"

	"github.com/matryer/is"
)

// A --busy-timeout past SQLite's 32-bit milliseconds (about 24.8 days: the
// operator means "wait as long as it takes") waits while another connection
// holds the file locked, as a short one waits its while. The look at the
// file that version and migrate take first (and every command takes at a
// file it refuses) passed the milliseconds to SQLite unclamped: they wrapped
// to a negative busy_timeout, which SQLite takes for none, and the command
// gave up at once, saying the file "stayed locked ... for the whole
// --busy-timeout (1000h0m0s)".
func TestALongBusyTimeoutWaitsForALockedFile(t *testing.T) {
	for _, cmd := range []string{"version", "migrate"} {
		t.Run(cmd, func(t *testing.T) {
			is := is.New(t)
			ctx := context.Background()
			path, db := exclusivelyLocked(t)

			type result struct {
				code   int
				stderr string
			}
			done := make(chan result, 1)
			go func() {
				code, _, stderr := cli(t, cmd, "--db", path, "--busy-timeout", "1000h")
				done <- result{code, stderr}
			}()
			select {
			case r := <-done:
				_, _ = db.ExecContext(ctx, `ROLLBACK`)
				t.Fatalf("gave up on the locked file told to wait 1000h: exit %d: %s", r.code, r.stderr)
			case <-time.After(3 * time.Second): // still waiting: what 1000h asks for
			}
			_, err := db.ExecContext(ctx, `ROLLBACK`)
			is.NoErr(err)
			is.NoErr(db.Close()) // an exclusive WAL connection keeps its lock until it closes
			r := <-done
			t.Log(r.stderr)
			is.Equal(r.code, exitOK) // once the lock is gone, it goes through
		})
	}
}
