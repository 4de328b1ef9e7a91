// Command agent is an LLM agent on turnframe, end to end, in one process
// and a few seconds: go run ./examples/agent.
//
// A scripted model (deterministic, no network) answers a user who searches
// a flight, books and pays it, and asks for the itinerary by email. Each
// tool call is a turnframe command, handed to its handler by a Mux, under
// the key "<message id>/<call id>":
//
//   - search_flights commits its results as a row of the app's own table,
//     in the transaction that commits the command (Outcome.With,
//     sqlitestore.SQLTx);
//   - book_flight commits an outbox message to the airline, which
//     deduplicates by Idempotency-Key;
//   - pay needs approval (Command.NeedsApproval): it waits until the user
//     approves (Runtime.Approve), then sends to payments, which can be asked
//     (a Verifier);
//   - send_email calls the mail remote itself, which hangs once: the
//     command's outcome is unknown, the tool result tells the model
//     "outcome unknown — do not retry; tell the user we are verifying", the
//     model says so, and a later Recover looks the email up by key and
//     settles it.
//
// The first process dies after [m2]'s commands committed, before its answer
// went out; a second opens the same SQLite file, with nothing of the
// first's memory (the conversation of the user's chat is read back from
// the app's table chats), runs Recover, which answers that turn from the
// journal, and goes on. The user's client never
// saw that answer and sends [m2] again, under the same message id:
// Runtime.ReceiveMessage finds the turn its first delivery began, writes
// nothing, and the answer recovery gave is sent again — no tool runs a
// second time. Dispatcher.Run sends the outbox on enqueue; the remotes are a real
// HTTP server on 127.0.0.1. The time is a clock the story moves.
//
// It prints the transcript and a table of every effect in each remote's
// ledger, and exits 0 only if each happened exactly once.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/turnframe/turnframe"
)

func main() {
	// An interrupt or a SIGTERM ends the story's context, so run returns
	// and removes its temporary folder; once it did, the signals are let
	// go, and a second one kills at once.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(ctx, stop)
	status := cli(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(status)
}

// usage is what --help prints.
const usage = `Usage: go run ./examples/agent

Plays an LLM agent on turnframe over a new SQLite file in a temporary
folder (removed at the end, or on an interrupt): tool calls as commands,
an approval, a process that dies mid-turn, a resent message, an email
whose outcome is unknown. It prints the transcript and a table of every
effect, and exits 0 only if each happened exactly once. It takes no
arguments.
`

// cli runs the example as its command line asks, and returns its exit
// status: 0 when every effect happened exactly once (or for --help), 1
// when not, 2 for a command line it refuses.
func cli(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	switch err := fs.Parse(args); {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case err != nil:
		return 2
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "agent takes no arguments, not %q\n\n%s", fs.Args(), usage)
		return 2
	}
	err := run(ctx, stdout, "")
	switch {
	case err == nil:
		return 0
	case ctx.Err() != nil:
		fmt.Fprintln(stderr, "agent: interrupted:", err)
	default:
		fmt.Fprintln(stderr, "agent:", err)
	}
	return 1
}

// settleWait bounds, in real time, the wait for the outbox's sends.
const settleWait = 10 * time.Second

// run plays the story over a new SQLite file in dir ("" for a new
// temporary folder, removed at the end), writing the transcript and the
// table of effects to w. It returns nil only if every effect happened
// exactly once at its remote.
func run(ctx context.Context, w io.Writer, dir string) error {
	if dir == "" {
		tmp, err := os.MkdirTemp("", "turnframe-agent-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	r := newRemotes()
	defer r.Close()
	sender, err := r.sender()
	if err != nil {
		return err
	}
	a := newAgent(w, filepath.Join(dir, "agent.db"), newClock(), r, sender)
	p, err := a.play(ctx)
	if err != nil {
		return err
	}
	defer p.store.Close()
	if err := a.awaitSends(ctx, p); err != nil {
		p.stopDispatch()
		return err
	}
	if err := p.stopDispatch(); err != nil {
		return err
	}
	return a.check(ctx, p)
}

// awaitSends waits until each outbox row's remote acted on it.
// Dispatcher.Run, woken by each commit that enqueued, sends them.
func (a *agent) awaitSends(ctx context.Context, p *process) error {
	ctx, cancel := context.WithTimeout(ctx, settleWait)
	defer cancel()
	rows, err := p.store.ListOutbox(ctx, turnframe.OutboxFilter{Account: account, Limit: 100})
	if err != nil {
		return err
	}
	for _, row := range rows {
		if err := a.remotes.waitFor(ctx, row.Destination, row.RemoteKey()); err != nil {
			return err
		}
		a.say("  Dispatcher.Run sent %s's outbox row to %s", row.Key, row.Destination)
	}
	return nil
}
