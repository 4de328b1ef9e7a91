package crashtest_test

import (
	"testing"

	"github.com/turnframe/turnframe/internal/crashtest/harness"
)

// TestCrashRecovery runs the crash harness on one SQLite file per remote
// kind (harness.CrashRecovery): 20 kills per kind by default (and in
// -short), TURNFRAME_CRASH_KILLS for the long run.
func TestCrashRecovery(t *testing.T) { harness.CrashRecovery(t, sqliteBackend{}, 20) }

// TestThreeProcessesDispatchOneFile: three child processes dispatch from
// one file at once; the remote receives every row exactly once.
func TestThreeProcessesDispatchOneFile(t *testing.T) {
	turns := 200
	if testing.Short() {
		turns = 80
	}
	harness.ThreeProcessesDispatchOneDatabase(t, sqliteBackend{}, turns)
}

// TestCLIAlongsideAWriter runs the turnframe CLI's read commands on the file
// while a child process writes turns and dispatches on it.
func TestCLIAlongsideAWriter(t *testing.T) {
	harness.CLIAlongsideAWriter(t, sqliteBackend{}, "../../cmd/turnframe")
}
