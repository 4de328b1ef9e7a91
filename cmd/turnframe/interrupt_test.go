package main

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/matryer/is"
)

// runMainEnv, set in a test binary's environment, makes that binary run
// the command line it is given as turnframe's main, signals and all, in
// place of its tests (TestMain).
const runMainEnv = "TURNFRAME_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// mainProcess starts this test binary as the turnframe command args, as
// main runs it, with stdout and stderr on the files given. done is closed
// once the process has ended and been waited for (its cmd.ProcessState
// set); it is killed when t ends, if still running.
func mainProcess(t *testing.T, stdout, stderr *os.File, args ...string) (cmd *exec.Cmd, done <-chan struct{}) {
	t.Helper()
	cmd = exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Kill() // an error if it has ended already
		<-ended
	})
	return cmd, ended
}

// fullPipe returns a pipe whose buffer is already full, so that a process
// writing to w blocks in the write until someone reads r: an output piped
// into a reader that stalled (a pager left open, a tee onto a hung mount).
func fullPipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	raw, err := w.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	fill := make([]byte, 4096)
	var werr error
	// os.Pipe's ends are non-blocking: the write that would wait fails
	// with EAGAIN, once the buffer is full.
	err = raw.Write(func(fd uintptr) bool {
		for {
			if _, werr = syscall.Write(int(fd), fill); werr != nil {
				return true
			}
		}
	})
	if err != nil || !errors.Is(werr, syscall.EAGAIN) {
		t.Fatalf("fill the pipe: %v, %v", err, werr)
	}
	return r, w
}

// A command stuck where its context does not reach (here, writing its
// confirmation to a pipe no one reads) is ended by a second Ctrl-C: the
// first ends the context every command stops on, and says that another
// ends it at once; the second is the signal's default, which ends the
// process. The second was swallowed like the first, and only a kill from
// another terminal ended the command.
func TestASecondInterruptEndsACommandAtOnce(t *testing.T) {
	if signal.Ignored(os.Interrupt) {
		// Inherited by the command, whose second Ctrl-C is then ignored
		// as its parent asked (a background job of a shell script).
		t.Skip("the tests run with SIGINT ignored")
	}
	is := is.New(t)
	f := mustFixture(t)
	_, stdout := fullPipe(t)
	errR, errW, err := os.Pipe()
	is.NoErr(err)
	cmd, ended := mainProcess(t, stdout, errW, "release", "--db", f.path, "--force", f.claimed.String())
	errW.Close()

	// The guard of a command that never ends: the test's own deadline,
	// ahead of the test binary's panic.
	ctx, cancel := context.WithCancel(context.Background())
	if deadline, ok := t.Deadline(); ok {
		ctx, cancel = context.WithDeadline(context.Background(), deadline.Add(-time.Until(deadline)/20))
	}
	defer cancel()
	lines := make(chan string)
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(errR)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
		close(lines)
	}()
	defer func() { cancel(); errR.Close(); <-read }()
	waitFor := func(what string) {
		t.Helper()
		for {
			select {
			case line, ok := <-lines:
				if !ok {
					t.Fatalf("the command ended its output without saying %q", what)
				}
				t.Log(line)
				if strings.Contains(line, what) {
					return
				}
			case <-ctx.Done():
				t.Fatalf("the command never said %q", what)
			}
		}
	}
	// It said it released the claim, and writes so on stdout next, which
	// blocks: it has long been listening for Ctrl-C.
	waitFor("was claimed by dead-worker")
	is.NoErr(cmd.Process.Signal(os.Interrupt)) // the first Ctrl-C
	waitFor("Ctrl-C again")
	is.NoErr(cmd.Process.Signal(os.Interrupt)) // the second

	select {
	case <-ended:
	case <-ctx.Done():
		t.Fatal("the command still runs after the second Ctrl-C")
	}
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	is.True(ws.Signaled())                // ended by the signal, as the shell's Ctrl-C ends a program
	is.Equal(ws.Signal(), syscall.SIGINT) // the second Ctrl-C
}
