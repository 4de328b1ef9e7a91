package main

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// release's help: "Without arguments, release ... marks every dispatching
// row whose lease has ended now outcome_unknown ... and prints their ids";
// the Store contract: "ExpireClaims moves every Dispatching row whose lease
// ended at now". The ALockedRowIsBusyAndUnchanged subtest shows a command
// that meets a row the application holds says so ("could not be done
// now", exit 1). On PostgreSQL ExpireClaims now skips a locked row (SKIP
// LOCKED): release of a claim whose lease ended, held by another session,
// used to report success, "marked 0 claim(s)", the row still dispatching.
// It now names the claim left behind and exits 1.
func TestPGReleaseNeverReportsAnEndedClaimItSkippedAsDone(t *testing.T) {
	is := is.New(t)
	f := mustPGFixture(t)
	ctx := context.Background()
	tx := holdPGRow(t, f, f.claimed) // another session holds the row whose lease ended

	code, out, stderr := cli(t, "release", "--db", f.path, "--busy-timeout", "200ms", "--json")
	t.Logf("exit %d, stdout %q, stderr %q", code, out, stderr)
	var rel releaseJSON
	if code == exitOK {
		is.NoErr(json.Unmarshal([]byte(out), &rel))
	}
	is.NoErr(tx.Rollback(ctx))
	rec, err := openPGFixture(t, f).GetOutbox(ctx, f.claimed)
	is.NoErr(err)
	t.Logf("the ended claim is %v", rec.Status)
	// Either the ended claim was marked, or release did not say it was done.
	is.True(code != exitOK || slices.Contains(rel.Expired, f.claimed.String()))
	if code != exitOK {
		is.Equal(code, exitFailure)                           // could not be done now: try again
		is.True(strings.Contains(stderr, f.claimed.String())) // naming the claim left behind
		is.Equal(rec.Status, turnframe.OutboxDispatching)     // which is as it was
	}
}
