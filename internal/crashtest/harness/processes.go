package harness

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/matryer/is"

	"github.com/turnframe/turnframe"
)

// fillOutbox commits turns in this process whose commands each enqueue one
// row, and returns how many rows it made.
func fillOutbox(t *testing.T, b Backend, db string, turns int) int {
	t.Helper()
	is := is.New(t)
	ctx := context.Background()
	store, err := b.Open(ctx, db, UseFill)
	is.NoErr(err) // open to fill
	defer store.Close()
	rt := turnframe.New(store)
	conv := rt.NewConversationID()
	h := turnframe.HandlerFunc(func(ctx context.Context, call turnframe.Call) turnframe.Outcome {
		return turnframe.Commit(nil, turnframe.OutboxMessage{Destination: "remote", Payload: call.Command.Payload})
	})
	rows := 0
	for i := range turns {
		account := accounts[i%2]
		turn, err := rt.Receive(ctx, account, conv, "fill")
		is.NoErr(err)
		var p turnframe.Plan
		for j := range commandsPerTurn {
			key := fmt.Sprintf("fill-%d-%d", i, j)
			p.Commands = append(p.Commands, turnframe.Command{Key: turnframe.IdempotencyKey(key), Case: "case", Name: "fill", Payload: []byte(key)})
			rows++
		}
		_, err = rt.Plan(ctx, account, turn, p)
		is.NoErr(err)
		_, err = rt.Execute(ctx, account, turn, h)
		is.NoErr(err)
		is.NoErr(rt.Deliver(ctx, account, turn, "ok"))
	}
	return rows
}

// ThreeProcessesDispatchOneDatabase: three child processes dispatch from
// one database of b at once, never expiring a claim (each sweep keeps its
// leases): the remote receives every row exactly once. turns is how many
// turns of three rows fill the outbox first.
func ThreeProcessesDispatchOneDatabase(t *testing.T, b Backend, turns int) {
	is := is.New(t)
	db := b.Create(t)
	rows := fillOutbox(t, b, db, turns)
	rem := newRemote(t, 0, false, true)

	var wg sync.WaitGroup
	errs := make([]error, 3)
	procs := make([]*proc, 3)
	for i := range procs {
		procs[i] = startChild(t, "dispatch", envDB+"="+db, envRemote+"="+rem.srv.URL, envInc+"="+strconv.Itoa(100+i))
	}
	for i, p := range procs {
		wg.Go(func() { errs[i] = p.finish() })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("dispatcher %d: %v\n%s", i, err, procs[i].stderr.String())
		}
	}

	v := rem.snapshot()
	perWorker := map[string]int{}
	raw, dups := 0, 0
	for _, ds := range v.deliveries {
		raw += len(ds)
		for _, d := range ds {
			perWorker[d.worker]++
			if d.dup {
				dups++
			}
		}
	}
	t.Logf("three processes: %d rows, %d raw deliveries, %d duplicates, %d keys applied, per worker %v", rows, raw, dups, len(v.applied), perWorker)
	is.Equal(len(v.applied), rows) // every row reached the remote
	is.Equal(raw, rows)            // exactly one raw delivery per row
	is.Equal(dups, 0)              // no row sent twice

	store, err := b.Open(context.Background(), db, UseAudit)
	is.NoErr(err)
	defer store.Close()
	done, err := store.ListOutbox(context.Background(), turnframe.OutboxFilter{Status: turnframe.OutboxCompleted, Limit: turnframe.MaxLimit})
	is.NoErr(err)
	is.Equal(len(done), rows) // every row settled Completed
}

// CLIAlongsideAWriter builds the turnframe CLI from cmdDir and runs its
// read commands on a database of b while a child process writes turns and
// dispatches on it: every run must exit 0.
func CLIAlongsideAWriter(t *testing.T, b Backend, cmdDir string) {
	is := is.New(t)
	cli := filepath.Join(t.TempDir(), "turnframe")
	if out, err := exec.Command("go", "build", "-o", cli, cmdDir).CombinedOutput(); err != nil {
		t.Fatalf("build cmd/turnframe: %v\n%s", err, out)
	}
	db := b.Create(t)
	rem := newRemote(t, 0, false, true)
	p := startChild(t, "work", envDB+"="+db, envRemote+"="+rem.srv.URL, envSeed+"=1", envInc+"=0", envTurns+"=60")
	is.True(p.waitLines(3) == 3) // the writer is up and has written

	runs := 0
	for p.waitLines(5) == 5 { // between every five progress lines of the writer
		for _, args := range [][]string{{"status", "--db", db}, {"outbox", "--db", db, "--limit", "5"}, {"status", "--db", db, "--json"}} {
			out, err := exec.Command(cli, args...).CombinedOutput()
			if err != nil {
				t.Fatalf("turnframe %s while a process writes: %v\n%s", strings.Join(args, " "), err, out)
			}
			runs++
		}
	}
	if err := p.finish(); err != nil {
		t.Fatalf("writer: %v\n%s", err, p.stderr.String())
	}
	t.Logf("%d CLI runs beside a writing process, all exit 0", runs)
	is.True(runs > 0)
}
