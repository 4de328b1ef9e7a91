package crashtest_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// TestMain runs the test binary as a child of the crash harness when
// TURNFRAME_CRASHTEST_ROLE is set, and as the tests otherwise.
func TestMain(m *testing.M) {
	if role := os.Getenv(envRole); role != "" {
		if err := runChild(role); err != nil {
			fmt.Fprintf(os.Stderr, "child %s: %v\n", role, err)
			os.Exit(3)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// proc is a running child.
type proc struct {
	cmd    *exec.Cmd
	lines  *bufio.Scanner
	stderr strings.Builder
	name   string
}

// startChild starts the test binary as a child in role, with env added.
func startChild(t *testing.T, role string, env ...string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{envRole + "=" + role}, env...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, lines: bufio.NewScanner(out), name: role}
	cmd.Stderr = &p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start child: %v", err)
	}
	return p
}

// waitLines reads up to n progress lines and reports how many came before
// the child closed its output.
func (p *proc) waitLines(n int) int {
	got := 0
	for got < n && p.lines.Scan() {
		if strings.HasPrefix(p.lines.Text(), "P ") {
			got++
		}
	}
	return got
}

// kill sends SIGKILL and reaps the child. It reports whether the child had
// already exited by itself (and with what error).
func (p *proc) kill() (exitedEarly bool, err error) {
	_ = p.cmd.Process.Signal(syscall.SIGKILL) // a child that exited already is a zombie until Wait: no error
	for p.lines.Scan() {
	}
	werr := p.cmd.Wait()
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return false, nil
	}
	return true, werr
}

// finish reads the child's output to the end and waits for it to exit.
func (p *proc) finish() error {
	for p.lines.Scan() {
	}
	return p.cmd.Wait()
}
