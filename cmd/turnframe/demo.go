package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/turnframe/turnframe"
)

func demoCommand() *command {
	return &command{
		name:    "demo",
		summary: "play a booking conversation against three misbehaving remotes",
		help: `Plays a five-turn booking conversation through turnframe, over a fresh SQLite
file and a real HTTP server on 127.0.0.1 standing for three remotes, each
keeping a ledger by Idempotency-Key, each declared to turnframe for what it
can do about an effect whose outcome is unknown:

  payments  can be asked: a Verifier looks a charge up in its ledger by key
            (it charges again on a repeated request)
  parking   deduplicates: it remembers a key for a day and answers a
            repeated request as the first
  bakery    can do neither: it cannot be asked, and bakes again on a repeat

Each remote meets an uncertain outcome. A payments charge is accepted and
then hangs past the send timeout (others meet a refused connection and a 503,
which are retried). The first "process" dies in the middle of a command, and
at the same moment in the middle of sending the cake order (its claim's lease
then ends with the row dispatching), after committing a turn it never
answered. A second process calls Recover, as an application does at start-up
and from its loop: it expires the dead claim, resolves every unknown outcome by
the policy of its remote, resumes the cut-short command, answers the turn left
unanswered, dispatches (the garage answers 500 once) and calls Recover again.
Meanwhile the chat platform, which never saw an answer to the cake message,
delivers it again under its message id: ReceiveMessage finds the turn it
began and hands back its answer, and no second cake is ordered.
What the policy could not settle safely — the cake — a person settles
(Recovery.Settle, as 'turnframe settle' does) after asking the bakery, and the
demo prints that row's audit trail. The clock jumps over backoffs and leases:
nothing sleeps. --seed chooses which charge meets which trouble, whether the
garage booked before its 500 and whether the cake order had left.

It ends with a table of every intended effect: its ledger count, the final
state of its outbox row, turn and journal entry, and how its unknown outcome,
if any, was resolved. The exit status is 0 only if every effect landed exactly
once and nothing is left unknown but what the table says a person settled;
otherwise it is 1 and the discrepancy is named.`,
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			db := fs.String("db", "", "write the demo database to `file`, which must not exist (default: a new temporary folder)")
			seed := fs.Int64("seed", 0, "`seed` choosing which effect meets which trouble (0: from the clock)")
			timeout := fs.Duration("send-timeout", 200*time.Millisecond,
				"how long a send waits for a remote (at most 1m: the demo waits this long, in real time, for the charge that hangs)")
			return func(ctx context.Context, e *env, args []string) error {
				if len(args) > 0 {
					return usagef("unexpected argument %q", args[0])
				}
				if *timeout <= 0 {
					return usagef("--send-timeout must be positive")
				}
				if *timeout > maxDemoSendTimeout {
					// One charge hangs until its send times out, on the real
					// clock: a longer timeout holds the demo that long.
					return usagef("--send-timeout must be at most %v: the demo waits that long, in real time, for the charge that hangs", maxDemoSendTimeout)
				}
				if err := checkFilePath(*db, "the demo writes a SQLite file"); err != nil {
					return err
				}
				return runDemo(ctx, e.stdout, demoOptions{DBPath: *db, Seed: *seed, SendTimeout: *timeout})
			}
		},
	}
}

// The demo runtime's command timeout and lease margin: an attempt holds
// its command for 15 s of the demo's clock. A dispatcher's claim is leased
// for the send timeout plus demoClaimMargin.
const (
	demoCommandTimeout = 10 * time.Second
	// maxDemoSendTimeout bounds --send-timeout: the payments charge that
	// hangs holds the demo for the whole send timeout, in real time.
	maxDemoSendTimeout = time.Minute
	demoLeaseMargin    = 5 * time.Second
	demoClaimMargin    = 5 * time.Second
)

// parkingMemory is how long the parking garage remembers an idempotency
// key, as declared to turnframe (Remote.Deduplicates).
const parkingMemory = 24 * time.Hour

// demoOptions configure runDemo; zero fields take their defaults.
type demoOptions struct {
	DBPath      string        // the database to write; "" for a new temporary folder
	Seed        int64         // chooses which effect meets which trouble; 0 from the clock
	SendTimeout time.Duration // how long a send waits; 0 for 200ms
}

// runDemo plays the demo, writing its narrative and summary to w. It returns
// nil only if every intended effect landed exactly once and nothing was
// left unknown but what a person settled; a discrepancy is an error naming
// it.
func runDemo(ctx context.Context, w io.Writer, opts demoOptions) error {
	if opts.Seed == 0 {
		opts.Seed = time.Now().UnixNano()%1_000_000 + 1
	}
	if opts.SendTimeout <= 0 {
		opts.SendTimeout = 200 * time.Millisecond
	}
	path, err := demoPath(opts.DBPath)
	if err != nil {
		return err
	}
	d := &demo{
		w:       &lockedWriter{w: w},
		opts:    opts,
		path:    path,
		clock:   newDemoClock(),
		effects: bookingScript(),
		byTurn:  make(map[turnframe.TurnID]*effect),
		byRow:   make(map[turnframe.OutboxID]*effect),
		booking: "booking/friday-8pm",
		late:    newLateAnswers(),
	}
	d.start = d.clock.Now()
	script := d.cast(demoRand(opts.Seed))
	d.server, err = newRemoteServer(script)
	if err != nil {
		return err
	}
	defer d.server.Close()
	if d.sender, err = d.server.sender(); err != nil {
		return err
	}
	return d.play(ctx)
}

// demoRand is the random source a seed stands for.
func demoRand(seed int64) *rand.Rand { return rand.New(rand.NewPCG(uint64(seed), 0x7475726e6672616d)) }

// cast chooses, with rng, which trouble each effect meets, and returns the
// server's script: the payments charges meet a refused connection, a 503
// and an accepted charge that hangs, in an order of rng's; the garage
// answers 500 before or after booking; the cake order's process dies after
// or before its request left.
func (d *demo) cast(rng *rand.Rand) map[string]misbehaviour {
	var payments []*effect
	for _, e := range d.effects {
		switch e.dest {
		case destPayments:
			payments = append(payments, e)
		case destParking:
			e.trouble = []misbehaviour{answer500AfterBooking, answer500BeforeBooking}[rng.IntN(2)]
		case destBakery:
			e.trouble = []misbehaviour{diesMidSend, diesBeforeSend}[rng.IntN(2)]
		}
	}
	troubles := []misbehaviour{refuseConnection, answer503, acceptThenHang}
	for i, j := range rng.Perm(len(payments)) {
		payments[j].trouble = troubles[i]
	}
	script := make(map[string]misbehaviour)
	for _, e := range d.effects {
		if e.dest != destBakery { // the bakery's trouble is its sender's death, not the server's
			script[e.remoteKey()] = e.trouble
		}
	}
	return script
}

// remotes declares what each destination's remote can do: the options
// every Runtime, Recovery and Dispatcher of the demo is made with, so the
// policy that resolves an unknown outcome is the one declared here.
func (d *demo) remotes() []turnframe.Option {
	return []turnframe.Option{
		turnframe.WithDestination(destPayments, turnframe.Remote{Verifier: d.server.paymentsVerifier()}),
		turnframe.WithDestination(destParking, turnframe.Remote{Deduplicates: parkingMemory}),
		turnframe.WithDestination(destBakery, turnframe.Remote{}),
	}
}

// demoPath returns where the demo writes its database: path, which must not
// exist yet, or a file in a new temporary folder.
func demoPath(path string) (string, error) {
	if path == "" {
		dir, err := os.MkdirTemp("", "turnframe-demo-")
		if err != nil {
			return "", err
		}
		return filepath.Join(dir, "demo.db"), nil
	}
	if err := newFileDir(path); err != nil {
		return "", err
	}
	if _, err := os.Stat(path); err == nil {
		return "", usagef("%s exists: the demo writes a fresh database; name a new file", path)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	return path, nil
}

// demo is one run of the demo.
type demo struct {
	w       io.Writer
	opts    demoOptions
	path    string
	clock   *demoClock
	start   time.Time
	server  *remoteServer
	sender  turnframe.Sender
	effects []*effect
	byTurn  map[turnframe.TurnID]*effect
	byRow   map[turnframe.OutboxID]*effect
	booking turnframe.CaseKey
	late    *lateAnswers
}

// lockedWriter serialises writes: the library's log lines (logger) may
// come from another goroutine than the narrative.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// logger is the logger of one process's runtime, recovery and dispatcher:
// the library's warnings and errors (an unknown outcome, a late answer),
// written into the narrative where they happen rather than to stderr —
// until dead is set: a dead process says nothing.
func (d *demo) logger(dead *atomic.Bool) *slog.Logger {
	return slog.New(slog.NewTextHandler(narrativeLog{d: d, dead: dead}, &slog.HandlerOptions{
		Level: slog.LevelWarn,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{} // the narrative stamps the demo's own time
			}
			return a
		},
	}))
}

// narrativeLog writes each log record as one line of the narrative.
type narrativeLog struct {
	d    *demo
	dead *atomic.Bool
}

func (n narrativeLog) Write(p []byte) (int, error) {
	if !n.dead.Load() {
		n.d.say("  log: %s", strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// say writes one line of the narrative, stamped with the demo's clock.
func (d *demo) say(format string, args ...any) {
	fmt.Fprintf(d.w, "%-8s %s\n", "t+"+d.clock.Now().Sub(d.start).Round(time.Second).String(), fmt.Sprintf(format, args...))
}

func (d *demo) play(ctx context.Context) error {
	fmt.Fprintf(d.w, "turnframe demo (seed %d): five effects on three remotes, each to land exactly once\n", d.opts.Seed)
	fmt.Fprintf(d.w, "database: %s\n", d.path)
	fmt.Fprintf(d.w, "remotes:  %s (send timeout %v), each with a ledger by Idempotency-Key, declared as\n", d.server.URL(), d.opts.SendTimeout)
	fmt.Fprintf(d.w, "  %-9s turnframe.Remote{Verifier: …}: a lookup by key (it charges again on a repeat)\n", destPayments)
	fmt.Fprintf(d.w, "  %-9s turnframe.Remote{Deduplicates: %v}: it answers a repeated key as the first\n", destParking, parkingMemory)
	fmt.Fprintf(d.w, "  %-9s turnframe.Remote{}: it can neither be asked nor deduplicate\n", destBakery)
	for _, e := range d.effects {
		if e.trouble != behaveWell {
			fmt.Fprintf(d.w, "  the %s (%s) will meet: %s\n", e.item, e.dest, e.trouble)
		}
	}
	fmt.Fprintln(d.w)
	if err := d.processOne(ctx); err != nil {
		return err
	}
	p2, err := d.startProcess(ctx, "process-2", false)
	if err != nil {
		return err
	}
	defer p2.store.Close()
	d.say("process-2 starts over the same file: new store, runtime, recovery and dispatcher, with the same declarations")
	if err := d.processTwo(ctx, p2); err != nil {
		return err
	}
	fmt.Fprintln(d.w)
	return d.summary(ctx, p2)
}

// processOne plays the first process: three charges, answered and
// dispatched; the cake order, committed and claimed for sending; and the
// parking command, during which the process dies. It returns once the
// leases the dead process held have ended on the demo's clock.
func (d *demo) processOne(ctx context.Context) error {
	p1, err := d.startProcess(ctx, "process-1", true)
	if err != nil {
		return err
	}
	defer p1.store.Close()
	d.say("process-1 starts: store, runtime, recovery and dispatcher, with the three declarations")
	conv := p1.rt.NewConversationID()
	for _, e := range d.effects[:3] {
		if err := d.playTurn(ctx, p1, conv, e, true); err != nil {
			return err
		}
	}
	if err := d.dispatchUntilIdle(ctx, p1); err != nil {
		return err
	}
	cake, parking := d.effects[3], d.effects[4]
	if err := d.playTurn(ctx, p1, conv, cake, false); err != nil {
		return err
	}
	d.clock.Advance(2 * time.Second)
	if err := d.receiveAndPlan(ctx, p1, conv, parking); err != nil {
		return err
	}
	claimEnds, err := d.claimAndDie(ctx, p1, cake)
	if err != nil {
		return err
	}
	why := ", and mid-send of the " + cake.item + " order"
	if cake.trouble == diesBeforeSend {
		why = ", and before the " + cake.item + " order left"
	}
	attemptEnds, release, err := d.crashMidExecution(ctx, p1, parking, why)
	if err != nil {
		return err
	}
	d.say("process-1 is gone: turn %d was never answered, the %s row is still claimed, the %s command still executing",
		cake.n, cake.item, parking.command)
	p1.dead.Store(true)
	p1.store.Close()
	// The handler the process died in is still a goroutine here: let it
	// return now, into the closed store, and wait for its late answer to be
	// refused, so it is never written to the file, whatever the timing.
	late := d.late.count()
	release()
	if err := d.late.waitFor(ctx, late+1); err != nil {
		return err
	}

	// A dead holder's claim and attempt hold their row and command until
	// their leases end: until then another process must take them for live.
	ends := claimEnds
	if attemptEnds.After(ends) {
		ends = attemptEnds
	}
	d.clock.AdvanceTo(ends.Add(time.Second))
	d.say("the leases process-1 held ended by t+%v: the claim on the %s row at t+%v, the attempt on %s at t+%v",
		d.since(ends), cake.item, d.since(claimEnds), parking.command, d.since(attemptEnds))
	return nil
}

// processTwo plays the second process: Recover at start-up, dispatching,
// the chat platform's redelivery of a message process-1 never answered,
// Recover again from its loop, dispatching, and the operator's settlement
// of what the policy handed to a person.
func (d *demo) processTwo(ctx context.Context, p2 *process) error {
	if err := d.recover(ctx, p2, "at start-up", turnframe.RecoveryScope{}); err != nil {
		return err
	}
	if err := d.dispatchUntilIdle(ctx, p2); err != nil {
		return err
	}
	if err := d.redeliver(ctx, p2, d.effects[3]); err != nil {
		return err
	}
	// From a running process, Recover leaves alone the turns that may be
	// in flight: those updated within an attempt's lease.
	d.clock.Advance(5 * time.Second)
	scope := turnframe.RecoveryScope{UpdatedBefore: d.clock.Now().Add(-(demoCommandTimeout + demoLeaseMargin))}
	if err := d.recover(ctx, p2, "from its loop", scope); err != nil {
		return err
	}
	if err := d.dispatchUntilIdle(ctx, p2); err != nil {
		return err
	}
	return d.operator(ctx, p2)
}

// since is how long after the demo's start t was, rounded for the narrative.
func (d *demo) since(t time.Time) time.Duration { return t.Sub(d.start).Round(time.Second) }
