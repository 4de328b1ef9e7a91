package main

// An internal test: package main cannot be imported by an external one.

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// TestACommandLineItWouldMisreadIsRefusedBeforeAnythingIsWritten: a
// mistyped -only ("enqeue") ran no workload, exited 0 and wrote a report of
// nothing over -out, the committed RESULTS.md; an unknown -sync ran every
// workload at a setting nobody meant. The command refuses both (exit 2)
// before it runs or writes anything. It builds the command, so that
// what is checked is what an operator runs.
func TestACommandLineItWouldMisreadIsRefusedBeforeAnythingIsWritten(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "compare")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	tests := []struct {
		name string
		args []string
		says string
	}{
		{"a mistyped workload", []string{"-only", "enqeue"}, `"enqeue" is not a workload`},
		{"one mistyped of two", []string{"-only", "drain,lantecy"}, `"lantecy" is not a workload`},
		{"a sync setting SQLite ignores", []string{"-sync", "FULL,NROMAL"}, `"NROMAL" is not FULL or NORMAL`},
		{"negative reps", []string{"-reps", "-1"}, "-reps -1 is negative"},
		{"an argument", []string{"RESULTS.md"}, `unexpected argument "RESULTS.md"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			out := filepath.Join(t.TempDir(), "RESULTS.md")
			is.NoErr(os.WriteFile(out, []byte("the committed results"), 0o644))
			cmd := exec.Command(bin, append([]string{"-quick", "-dir", t.TempDir(), "-out", out}, tt.args...)...)
			cmd.Env = append(os.Environ(), "TURNFRAME_PG_URL=")
			stderr, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			is.True(errors.As(err, &exit))                     // it fails
			is.Equal(exit.ExitCode(), 2)                       // a usage error
			is.True(strings.Contains(string(stderr), tt.says)) // says why
			b, err := os.ReadFile(out)
			is.NoErr(err)
			is.Equal(string(b), "the committed results") // -out untouched
		})
	}
}
