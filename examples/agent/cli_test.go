package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/matryer/is"
)

// TestMain runs the example's main when a test started this binary as
// the example (runAsMain), so a test can signal a real process.
func TestMain(m *testing.M) {
	if os.Getenv(runAsMain) == "1" {
		main()
	}
	os.Exit(m.Run())
}

// runAsMain names the variable that makes this test binary the example.
const runAsMain = "TURNFRAME_AGENT_RUN_MAIN"

// The command line: --help says what the example is and runs nothing, and
// an argument it does not know is refused, not ignored. (Every argument
// was ignored: `go run ./examples/agent --help` played the whole story.)
func TestTheCommandLine(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		status int
		stderr string // a part of what the example writes to stderr
	}{
		{"HelpRunsNothing", []string{"--help"}, 0, "Usage: go run ./examples/agent"},
		{"AnUnknownFlagIsRefused", []string{"--db", "x.db"}, 2, "flag provided but not defined: -db"},
		{"AnArgumentIsRefused", []string{"story.txt"}, 2, "takes no arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			var stdout, stderr bytes.Buffer
			got := cli(context.Background(), tt.args, &stdout, &stderr)
			is.Equal(got, tt.status)                                  // the exit status
			is.True(strings.Contains(stderr.String(), tt.stderr))     // the reason
			is.True(!strings.Contains(stdout.String(), "== process")) // no story was played
		})
	}
}

// Interrupted (Ctrl-C, or a SIGTERM from a supervisor), the example stops
// and removes the temporary folder its SQLite file is in. It left the
// folder, file and all, behind each time before: the signal ended the
// process before run's deferred removal.
func TestAnInterruptedRunRemovesItsFolder(t *testing.T) {
	is := is.New(t)
	tmp := t.TempDir()
	cmd := exec.Command(os.Args[0]) // main, with no arguments
	cmd.Env = append(os.Environ(), runAsMain+"=1", "TMPDIR="+tmp)
	out, err := cmd.StdoutPipe()
	is.NoErr(err)
	is.NoErr(cmd.Start())
	lines := bufio.NewScanner(out)
	is.True(lines.Scan()) // the story began
	folders, err := filepath.Glob(filepath.Join(tmp, "turnframe-agent-*"))
	is.NoErr(err)
	is.Equal(len(folders), 1) // its folder exists while it runs
	is.NoErr(cmd.Process.Signal(syscall.SIGINT))
	for lines.Scan() {
	}
	_ = cmd.Wait() // interrupted, or finished first: either way it ended
	folders, err = filepath.Glob(filepath.Join(tmp, "turnframe-agent-*"))
	is.NoErr(err)
	is.Equal(len(folders), 0) // the folder is gone
}
