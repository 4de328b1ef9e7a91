package harness

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// Main is the TestMain of a package that runs the harness on b: it runs
// the test binary as a child of the crash harness when
// TURNFRAME_CRASHTEST_ROLE is set (the harness starts the binary again so),
// and as the tests otherwise. It does not return.
func Main(m *testing.M, b Backend) {
	if role := os.Getenv(envRole); role != "" {
		if err := runChild(role, b); err != nil {
			fmt.Fprintf(os.Stderr, "child %s: %v\n", role, err)
			os.Exit(3)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// proc is a running child. A goroutine of its own reads its output to the
// end: every line goes to onLine, and every progress line ("P …") is
// counted and pokes notify, so the parent can block until a child has made
// progress, or ended, without polling.
type proc struct {
	cmd    *exec.Cmd
	name   string
	stderr strings.Builder // read only after the child was reaped
	stdin  io.WriteCloser  // open while the child should run on, for roles that stop at EOF
	done   chan struct{}   // closed once the child's output ended
	notify chan struct{}   // poked on every progress line (see spec.notify)

	reaped bool // Wait was called (parent goroutine only)

	mu       sync.Mutex
	progress int    // progress lines read so far
	last     string // the last progress line
}

// spec says how to start a child.
type spec struct {
	role   string
	name   string // the child's name (its worker id); the role when empty
	env    []string
	stdin  bool                       // give the child a stdin pipe that stays open until stop
	notify chan struct{}              // poked (without blocking) on every progress line; may be shared
	onLine func(p *proc, line string) // called for every line, on the reader goroutine
}

// startChild starts the test binary as a child in role, with env added.
func startChild(t *testing.T, role string, env ...string) *proc {
	t.Helper()
	return start(t, spec{role: role, env: env})
}

func start(t *testing.T, s spec) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{envRole + "=" + s.role}, s.env...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if s.notify == nil {
		s.notify = make(chan struct{}, 1)
	}
	if s.name == "" {
		s.name = s.role
	}
	p := &proc{cmd: cmd, name: s.name, done: make(chan struct{}), notify: s.notify}
	if s.stdin {
		if p.stdin, err = cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
	}
	cmd.Stderr = &p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start child: %v", err)
	}
	go p.read(out, s)
	t.Cleanup(func() { // a test that failed half way leaves no child behind
		if !p.reaped {
			_, _ = p.kill()
		}
	})
	return p
}

func (p *proc) read(out io.Reader, s spec) {
	defer close(p.done)
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if s.onLine != nil {
			s.onLine(p, line)
		}
		if strings.HasPrefix(line, "P ") {
			p.mu.Lock()
			p.progress++
			p.last = line
			p.mu.Unlock()
			select {
			case s.notify <- struct{}{}:
			default:
			}
		}
	}
	_, _ = io.Copy(io.Discard, out) // a line too long for the scanner: keep the pipe drained
}

// lines returns how many progress lines were read so far, and the last.
func (p *proc) lines() (int, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.progress, p.last
}

// exited reports whether the child's output ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// waitLines blocks until n more progress lines came, or the child closed
// its output, and reports how many came.
func (p *proc) waitLines(n int) int {
	from, _ := p.lines()
	for {
		got, _ := p.lines()
		if got-from >= n {
			return n
		}
		if p.exited() {
			got, _ = p.lines()
			return min(got-from, n)
		}
		p.waitProgress()
	}
}

// waitProgress blocks until the reader saw another progress line or the
// output ended. A poke may be left over from an earlier line: that only
// makes the caller look again.
func (p *proc) waitProgress() {
	select {
	case <-p.notify:
	case <-p.done:
	}
}

// kill sends SIGKILL and reaps the child. It reports whether the child had
// already exited by itself (and with what error).
func (p *proc) kill() (exitedEarly bool, err error) {
	_ = p.cmd.Process.Signal(syscall.SIGKILL) // a child that exited already is a zombie until Wait: no error
	<-p.done
	werr := p.cmd.Wait()
	p.reaped = true
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return false, nil
	}
	return true, werr
}

// finish reads the child's output to the end and waits for it to exit.
func (p *proc) finish() error {
	if p.stdin != nil {
		p.stdin.Close()
	}
	<-p.done
	p.reaped = true
	return p.cmd.Wait()
}
