package main

import (
	"context"
	"strings"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// The process that received [m2] is alive, its model still thinking, when
// a second process starts (a rolling restart) and its start-up pass finds
// the turn received but unplanned: RestartInterpretation interprets and
// answers it. The first delivery's flow then goes on, and its Plan is
// refused (a turn is interpreted once): it leaves the turn to the flow that
// answered it, without an error. Before, it failed on a message that was
// answered.
func TestTheFirstDeliveryLeavesATurnRecoveryInterpretedToIt(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	a, p1, out := startedAgent(ctx, t)
	got, err := a.receive(ctx, p1, msgBook)
	is.NoErr(err)
	// p1's model is thinking; process-2 starts on the same file.
	p2, err := a.start(ctx, "process-2", false)
	is.NoErr(err)
	defer p2.close()
	_, err = p2.rec.Recover(ctx, turnframe.RecoveryScope{}, recoverer{a, p2})
	is.NoErr(err)
	// p1's model answers with its tool calls: the first delivery goes on.
	err = a.interpret(ctx, p1, got.Turn, msgBook, false, "assistant")
	t.Log(out.String())
	is.NoErr(err)                                                                        // the first delivery's flow of an answered message ends without an error
	is.True(strings.Contains(out.String(), "(delivered by recovery)"))                   // recovery answered it
	is.True(strings.Contains(out.String(), "was interpreted by another flow meanwhile")) // and the first flow left it to recovery
}
