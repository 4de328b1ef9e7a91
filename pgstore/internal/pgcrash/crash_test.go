// Package pgcrash_test runs the crash harness (internal/crashtest/harness)
// on PostgreSQL: several processes, the test binary run again, on one
// schema, killed at random points and restarted.
package pgcrash_test

import (
	"testing"

	"github.com/turnframe/turnframe/internal/crashtest/harness"
	"github.com/turnframe/turnframe/pgstore/pgtest"
)

// TestMain runs the test binary as a child of the crash harness when the
// harness started it so, and as the tests otherwise.
func TestMain(m *testing.M) { harness.Main(m, pgBackend{}) }

// TestCrashRecovery runs the crash harness on one PostgreSQL schema per
// remote kind: two work children, the expirer and, at the end, two drain
// children on it at once, killed with SIGKILL 15 times per kind by
// default, which keeps the three runs near two minutes under -race
// (TURNFRAME_CRASH_KILLS for the long run, TURNFRAME_CRASH_SEED to replay
// the draws).
func TestCrashRecovery(t *testing.T) {
	pgtest.ServerURL(t)
	harness.CrashRecovery(t, pgBackend{}, 15)
}

// TestCrashThreeProcessesDispatchOneDatabase: three child processes
// dispatch from one schema at once; the remote receives every row exactly
// once.
func TestCrashThreeProcessesDispatchOneDatabase(t *testing.T) {
	pgtest.ServerURL(t)
	turns := 200
	if testing.Short() {
		turns = 80
	}
	harness.ThreeProcessesDispatchOneDatabase(t, pgBackend{}, turns)
}
