package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// testAgent returns the example's agent over a new SQLite file, with its
// remotes, writing its transcript to out.
func testAgent(t *testing.T, out *bytes.Buffer) *agent {
	t.Helper()
	r := newRemotes()
	t.Cleanup(r.Close)
	sender, err := r.sender()
	if err != nil {
		t.Fatalf("sender: %v", err)
	}
	return newAgent(out, filepath.Join(t.TempDir(), "agent.db"), newClock(), r, sender)
}

// startedAgent returns a testAgent and its first process, process-1, on
// the new file, and the transcript they write. The process is closed when
// the test ends.
func startedAgent(ctx context.Context, t *testing.T) (*agent, *process, *bytes.Buffer) {
	t.Helper()
	var out bytes.Buffer
	a := testAgent(t, &out)
	p, err := a.start(ctx, "process-1", true)
	if err != nil {
		t.Fatalf("start process-1: %v", err)
	}
	t.Cleanup(func() { _ = p.close() })
	return a, p, &out
}

// The likeliest moment for an agent to die is while its model thinks:
// after ReceiveMessage committed the turn, before Plan admitted the tool
// calls. Recovery then decides RestartInterpretation, and the example
// interprets the turn again, as its first delivery would have: the tools
// run, the answer goes out, and the client's resend under the same
// message id gets that answer. (The example abandoned the turn before,
// and every resend was told "I am still working on that.": the request
// was lost without a word.)
func TestACrashWhileTheModelThinksIsInterpretedAgain(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	var out bytes.Buffer
	a := testAgent(t, &out)

	p1, err := a.start(ctx, "process-1", true)
	is.NoErr(err)
	// [m2] arrives; the process dies while the model works out its tool calls.
	got, err := a.receive(ctx, p1, msgBook)
	is.NoErr(err)
	is.True(!got.Redelivered) // the first delivery
	is.NoErr(p1.close())

	p2, err := a.start(ctx, "process-2", false)
	is.NoErr(err)
	defer p2.close()
	_, err = p2.rec.Recover(ctx, turnframe.RecoveryScope{}, recoverer{a, p2})
	is.NoErr(err)
	// The user's client never saw an answer and sends [m2] again, twice.
	is.NoErr(a.respond(ctx, p2, msgBook, false))
	is.NoErr(a.respond(ctx, p2, msgBook, false))
	_, err = p2.rec.Recover(ctx, turnframe.RecoveryScope{}, recoverer{a, p2})
	is.NoErr(err)
	text := out.String()
	t.Log(text)

	_, err = p2.store.ByKey(ctx, account, commandKey(msgBook.ID, script[askBook][0]))
	is.NoErr(err)                                                                                // the booking the user asked for was admitted
	is.Equal(strings.Count(text, "model calls book_flight"), 1)                                  // by recovery, once
	is.True(!strings.Contains(text, "I am still working on that."))                              // no resend is told a turn runs that nobody runs
	is.Equal(strings.Count(text, "assistant (again, from the first turn): TP123 is booked."), 2) // each resend gets recovery's answer
}

// A resend of a message whose turn was abandoned is told so, never that
// the turn is still running.
func TestAnAbandonedTurnIsNotStillWorking(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	a, p, out := startedAgent(ctx, t)
	got, err := a.receive(ctx, p, msgBook)
	is.NoErr(err)
	is.NoErr(p.rt.Abandon(ctx, account, got.Turn, "test.abandon"))

	is.NoErr(a.respond(ctx, p, msgBook, false))
	text := out.String()
	t.Log(text)
	is.True(!strings.Contains(text, "I am still working on that.")) // the abandoned turn runs nowhere
	is.True(strings.Contains(text, "I gave up on that message"))    // the user is told it was given up
	_, err = p.store.ByKey(ctx, account, commandKey(msgBook.ID, script[askBook][0]))
	is.True(err != nil) // and nothing ran for it
}
