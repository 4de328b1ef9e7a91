package turnframe_test

import (
	"context"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// stacksWith returns the stacks of the goroutines that hold frame.
func stacksWith(frame string) string {
	buf := make([]byte, 1<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	var out []string
	for _, g := range strings.Split(stacks, "\n\n") {
		if strings.Contains(g, frame) {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}

// leftAfterCall polls (yielding) for goroutines holding frame to end, and
// returns the stacks of those still there: a goroutine merely finishing as
// the call returns ends within microseconds. The bound is a safety net,
// half of the connect budget (httpConnectBudget, 10 s) a leaked dial would
// run for.
func leftAfterCall(frame string) string {
	giveUp := time.Now().Add(5 * time.Second)
	for stacksWith(frame) != "" && time.Now().Before(giveUp) {
		runtime.Gosched()
	}
	return stacksWith(frame)
}

// DESIGN.md §1: "The library starts no goroutine that outlives a call. The
// one exception Go forces is section 2" (application code that ignores its
// context). HTTPSender is the library's own code and honours its context,
// yet its default client's connect — net/http dials under a context
// detached from the request's cancellation — goes on for up to the connect
// budget (10 s) after Send returned, when Send's context was cancelled
// rather than timed out (RunOnce's caller cancelling, an app calling Send).
func TestHTTPSenderLeavesNothingRunningOnceSendReturns(t *testing.T) {
	is := is.New(t)
	addr, accepted := silentTLSServer(t)
	s, err := turnframe.NewHTTPSender(map[string]string{"d": "https://" + addr + "/x"})
	is.NoErr(err)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan turnframe.Dispatched, 1)
	go func() {
		done <- s.Send(ctx, turnframe.OutboxEntry{Key: "k", Destination: "d", Account: "a"})
	}()
	conn := <-accepted // the TCP connection is open; the TLS handshake hangs
	defer conn.Close()
	cancel()
	out := <-done
	t.Logf("Send returned %v %s", out.Kind, out.Code)

	if g := leftAfterCall("turnframe.(*httpDialer)"); g != "" {
		t.Fatalf("a goroutine HTTPSender.Send started outlived it:\n%s", g)
	}
}

// The same through RunOnce, whose doc says it returns "with nothing of its
// own left running — except a Sender that ignores its context past its
// deadline": its caller cancels while the row's connect is under way.
func TestRunOnceWithHTTPSenderLeavesNothingRunningWhenCancelled(t *testing.T) {
	is := is.New(t)
	store := memstoreFor(t)
	addr, accepted := silentTLSServer(t)
	rows := dispEnqueue(t, store, rtAccount, "k1", turnframe.OutboxMessage{Destination: "d"})
	s, err := turnframe.NewHTTPSender(map[string]string{"d": "https://" + addr + "/x"})
	is.NoErr(err)
	d := turnframe.NewDispatcher(store, s, turnframe.DefaultDispatchConfig("w1"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan turnframe.DispatchReport, 1)
	go func() {
		r, err := d.RunOnce(ctx, dispNow)
		is.NoErr(err)
		done <- r
	}()
	conn := <-accepted
	defer conn.Close()
	cancel()
	report := <-done
	t.Logf("RunOnce returned %+v for row %v", report, rows[0].ID)
	if g := leftAfterCall("turnframe.(*httpDialer)"); g != "" {
		t.Fatalf("a goroutine RunOnce started outlived it:\n%s", g)
	}
}

// silentTLSServer listens on a local port, accepts every connection and
// never speaks TLS, so a client's handshake waits; it hands each accepted
// connection over and stops when the test ends.
func silentTLSServer(t *testing.T) (addr string, accepted <-chan net.Conn) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	conns := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns <- c
		}
	}()
	return ln.Addr().String(), conns
}
