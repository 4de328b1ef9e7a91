package crashtest_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

// crashKills is how many children TestCrashRecovery kills: 30 by default
// (and in -short), TURNFRAME_CRASH_KILLS for the long run.
func crashKills(t *testing.T) int {
	if v := os.Getenv("TURNFRAME_CRASH_KILLS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("TURNFRAME_CRASH_KILLS=%q: want a positive number", v)
		}
		return n
	}
	return 30
}

func crashSeed(t *testing.T) uint64 {
	if v := os.Getenv("TURNFRAME_CRASH_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("TURNFRAME_CRASH_SEED=%q: %v", v, err)
		}
		return n
	}
	return uint64(time.Now().UnixNano())
}

// TestCrashRecovery runs a real workload in a child process on a file
// database, kills it with SIGKILL after a random number of progress lines,
// restarts it, and repeats; a last child drains everything. Then nothing
// may be lost, doubled, or left unfinished.
func TestCrashRecovery(t *testing.T) {
	kills, seed := crashKills(t), crashSeed(t)
	t.Logf("seed %d, %d kills (replay the draws with TURNFRAME_CRASH_SEED=%d)", seed, kills, seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	rem := newRemote(t, seed, true)
	db := filepath.Join(t.TempDir(), "crash.db")
	env := []string{envDB + "=" + db, envRemote + "=" + rem.srv.URL, envSeed + "=" + strconv.FormatUint(seed, 10)}

	killed := map[string]bool{}
	lines := 0
	for inc := range kills {
		p := startChild(t, "work", append(env, envInc+"="+strconv.Itoa(inc))...)
		n := 1 + rng.IntN(60)
		got := p.waitLines(n)
		lines += got
		exited, err := p.kill()
		if exited {
			t.Fatalf("child %d exited by itself after %d of %d progress lines: %v\nstderr:\n%s", inc, got, n, err, p.stderr.String())
		}
		killed[fmt.Sprintf("child-%d", inc)] = true
	}
	p := startChild(t, "drain", append(env, envInc+"="+strconv.Itoa(kills))...)
	if err := p.finish(); err != nil {
		t.Fatalf("drain: %v\nstderr:\n%s", err, p.stderr.String())
	}
	f := audit(t, db, rem, killed)
	f.kills = kills
	f.lines = lines
	t.Logf("crash run, seed %d:\n%s", seed, f)
	f.assert(t)
}

// figures are what an audit measured.
type figures struct {
	kills, lines                               int
	turns, unfinished, notDelivered            int
	committed, rejected, unsettled             int
	rows, completed, failed, open              int
	lost, extraRows, committedTwice            int
	appliedTwice, failedButApplied             int
	overDelivered                              int
	duplicates, explained                      int
	commandRepeats, commandMismatch            int
	reconciledCompleted, reconciledNotReceived int
	integrity                                  string
}

func (f figures) String() string {
	return fmt.Sprintf(`  kills survived:                 %d (progress lines seen before the kills: %d)
  turns:                          %d (not delivered: %d, unfinished for recovery: %d)
  commands:                       committed %d, rejected %d, unsettled %d
  unknown commands reconciled:    %d found at the remote, %d never received
  outbox rows:                    %d (completed %d, failed with a reason %d, still open %d)
  effects lost:                   %d (rows missing for a committed command, or open, or completed but absent at the remote)
  rows without a committed command: %d
  commands committed twice:       %d (events per key)
  effects applied twice:          %d (ledger)
  failed rows applied anyway:     %d
  rows delivered more often than claimed: %d
  duplicate raw deliveries:       %d (explained by the expired claim of a killed worker: %d)
  domain calls repeated by resume: %d (deduplicated by key at the remote)
  domain calls disagreeing with their journal entry: %d
  integrity_check:                %s`,
		f.kills, f.lines, f.turns, f.notDelivered, f.unfinished, f.committed, f.rejected, f.unsettled,
		f.reconciledCompleted, f.reconciledNotReceived,
		f.rows, f.completed, f.failed, f.open, f.lost, f.extraRows, f.committedTwice, f.appliedTwice,
		f.failedButApplied, f.overDelivered, f.duplicates, f.explained, f.commandRepeats, f.commandMismatch, f.integrity)
}

func (f figures) assert(t *testing.T) {
	t.Helper()
	is := is.New(t)
	is.Equal(f.lost, 0)                 // no intended effect lost
	is.Equal(f.open, 0)                 // no row left pending, dispatching or unknown
	is.Equal(f.appliedTwice, 0)         // no effect applied twice
	is.Equal(f.committedTwice, 0)       // no command committed twice
	is.Equal(f.extraRows, 0)            // no row without its command
	is.Equal(f.failedButApplied, 0)     // a failed row never reached the remote
	is.Equal(f.overDelivered, 0)        // a row is sent only under a claim
	is.Equal(f.duplicates, f.explained) // every duplicate delivery has an expired claim behind it
	is.Equal(f.unsettled, 0)            // every command settled
	is.Equal(f.unfinished, 0)           // no turn left for recovery
	is.Equal(f.notDelivered, 0)         // every turn answered
	is.Equal(f.commandMismatch, 0)      // reconciliations agree with the remote
	is.Equal(f.integrity, "ok")         // PRAGMA integrity_check
}

// audit opens the file after every child is gone and checks it against the
// remote's ledger.
func audit(t *testing.T, db string, rem *remote, killed map[string]bool) figures {
	t.Helper()
	ctx := context.Background()
	store, err := sqlitestore.Open(ctx, db, sqlitestore.WithExisting())
	if err != nil {
		t.Fatalf("open for audit: %v", err)
	}
	defer store.Close()
	applied, deliveries := rem.snapshot()
	var f figures

	if err := store.ReadDB().QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&f.integrity); err != nil {
		t.Fatalf("integrity_check: %v", err)
	}
	rows, err := store.ListOutbox(ctx, turnframe.OutboxFilter{Limit: turnframe.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) == turnframe.MaxLimit {
		t.Fatalf("%d outbox rows or more: too many to audit in one listing", len(rows))
	}
	byKey := map[string]turnframe.OutboxRecord{}
	for _, r := range rows {
		byKey[string(r.Account)+"\x00"+string(r.Key)] = r
		f.rows++
		switch r.Status {
		case turnframe.OutboxCompleted:
			f.completed++
		case turnframe.OutboxFailed:
			f.failed++
			if r.LastCode == "" {
				f.lost++ // failed without a reason
			}
			if applied[r.RemoteKey()] > 0 {
				f.failedButApplied++
			}
		default:
			f.open++
		}
		ds := deliveries[r.RemoteKey()]
		if len(ds) > r.Attempts {
			f.overDelivered++
		}
		applier := ""
		for _, d := range ds {
			if d.applied {
				applier = d.worker
			}
			if d.dup {
				f.duplicates++
				if killed[applier] {
					f.explained++
				}
			}
		}
	}
	for k, n := range applied {
		if n > 1 {
			f.appliedTwice++
			t.Logf("applied %d times: %s", n, k)
		}
	}

	turns, err := store.ReadDB().QueryContext(ctx, "SELECT account, id FROM turns ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	type turnRef struct {
		account turnframe.AccountID
		id      turnframe.TurnID
	}
	var refs []turnRef
	for turns.Next() {
		var acct, id string
		if err := turns.Scan(&acct, &id); err != nil {
			t.Fatal(err)
		}
		tid, err := turnframe.ParseTurnID(id)
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, turnRef{turnframe.AccountID(acct), tid})
	}
	if err := turns.Err(); err != nil {
		t.Fatal(err)
	}
	turns.Close()

	expectedRowKeys := map[string]bool{}
	for _, ref := range refs {
		f.turns++
		m, err := store.TurnPhase(ctx, ref.account, ref.id)
		if err != nil {
			t.Fatal(err)
		}
		if m.Phase != turnframe.PhaseDelivered {
			f.notDelivered++
		}
		entries, err := store.ForTurn(ctx, ref.account, ref.id)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			f.auditEntry(t, store, e, byKey, applied, deliveries, expectedRowKeys)
		}
	}
	for k := range byKey {
		if !expectedRowKeys[k] {
			f.extraRows++
		}
	}
	for _, acct := range accounts {
		for j := range commandsPerTurn {
			evs, err := store.EventsSince(ctx, acct, turnframe.CaseKey(fmt.Sprintf("case-%d", j)), 0, turnframe.MaxLimit)
			if err != nil {
				t.Fatal(err)
			}
			seen := map[turnframe.IdempotencyKey]int{}
			for _, ev := range evs {
				seen[ev.Key]++
				if seen[ev.Key] == 2 {
					f.committedTwice++
				}
			}
		}
	}
	unfinished, err := store.ListUnfinishedTurns(ctx, turnframe.RecoveryScope{}, turnframe.MaxLimit)
	if err != nil {
		t.Fatal(err)
	}
	f.unfinished = len(unfinished)
	return f
}

func (f *figures) auditEntry(t *testing.T, store *sqlitestore.Store, e turnframe.JournalEntry,
	byKey map[string]turnframe.OutboxRecord, applied map[string]int, deliveries map[string][]delivery, expected map[string]bool) {
	t.Helper()
	ctx := context.Background()
	cmdKey := commandRemoteKey(e.Account, e.Key)
	atRemote := applied[cmdKey] > 0
	for _, d := range deliveries[cmdKey] {
		if d.dup {
			f.commandRepeats++
		}
	}
	switch e.Status {
	case turnframe.JournalCommitted:
		f.committed++
		evs, err := store.EventsByID(ctx, e.Account, e.EventIDs)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case e.Name == kindTimeout || (e.Name == kindRemote && len(evs) == 0): // committed by a reconciliation, without events
			f.reconciledCompleted++
			if len(evs) != 0 || !atRemote {
				f.commandMismatch++
			}
		case len(evs) != 1 || evs[0].Key != e.Key:
			f.lost++
		case e.Name == kindRemote && !atRemote:
			f.commandMismatch++
		}
		n := expectedRows(e.Name)
		for i := range n {
			k := string(e.Account) + "\x00" + string(turnframe.OutboxKey(e.Key, i, n))
			expected[k] = true
			r, ok := byKey[k]
			switch {
			case !ok:
				f.lost++
			case r.Status == turnframe.OutboxCompleted && applied[r.RemoteKey()] == 0:
				f.lost++ // completed, yet the remote never applied it
			}
		}
	case turnframe.JournalRejected:
		f.rejected++
		if e.Code == codeNotReceived {
			f.reconciledNotReceived++
			if atRemote {
				f.commandMismatch++
			}
		}
	default:
		f.unsettled++
	}
}
