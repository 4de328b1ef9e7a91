package turnframe_test

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

// RunOnce: "a send whose outcome is known is never sent again because one
// write failed." A disk that fills while a send is in flight makes the
// settlement's COMMIT fail (SQLite rolls it back: nothing was written), as a
// busy file does; the disk frees a moment later. The Dispatcher gave the
// settlement up at the first refusal, the row stayed Dispatching, expired as
// an unknown outcome once its lease ended, and was sent a second time.
//
// The disk is filled with RLIMIT_FSIZE in a child process (SIGXFSZ ignored,
// so a write past it fails with EFBIG): no root, no mount.
func TestASettlementRefusedByAFullDiskIsNotGivenUp(t *testing.T) {
	if os.Getenv("TURNFRAME_TEST_DISKFULL_CHILD") == "1" {
		diskFullChild(t)
		return
	}
	is := is.New(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestASettlementRefusedByAFullDiskIsNotGivenUp$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "TURNFRAME_TEST_DISKFULL_CHILD=1")
	out, err := cmd.CombinedOutput()
	t.Logf("child:\n%s", lastLines(string(out), 20))
	is.NoErr(err) // the child's assertions hold
}

func diskFullChild(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	signal.Ignore(syscall.SIGXFSZ)
	var free syscall.Rlimit
	is.NoErr(syscall.Getrlimit(syscall.RLIMIT_FSIZE, &free))
	fill := func() { is.NoErr(syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: 0, Max: free.Max})) }
	var freeOnce sync.Once
	unfill := func() { freeOnce.Do(func() { is.NoErr(syscall.Setrlimit(syscall.RLIMIT_FSIZE, &free)) }) }
	defer unfill()

	store, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "turnframe.db"))
	is.NoErr(err)
	t.Cleanup(func() { store.Close() })
	rows := dispEnqueue(t, store, "acme", "k1", dispMessages(1, "payments", "")...)

	var mu sync.Mutex
	sends := 0
	sender := turnframe.SenderFunc(func(context.Context, turnframe.OutboxEntry) turnframe.Dispatched {
		mu.Lock()
		defer mu.Unlock()
		sends++
		if sends == 1 {
			fill() // the disk fills while the remote does its work
		}
		return turnframe.Dispatched{Kind: turnframe.DispatchCompleted, RemoteRef: "charge-1"}
	})
	// The disk frees as soon as the dispatcher has met the full disk once
	// (whatever it then says it does).
	logger := slog.New(hookHandler{Handler: slog.NewTextHandler(os.Stderr, nil), hook: func(msg string) {
		if strings.Contains(msg, "settle") {
			unfill()
		}
	}})
	now := dispNow.Add(time.Second)
	clock := func() time.Time { return now }
	d := turnframe.NewDispatcher(store, sender, turnframe.DispatchConfig{WorkerID: "w1"},
		turnframe.WithClock(clock), turnframe.WithLogger(logger))
	report, err := d.RunOnce(ctx, now)
	is.NoErr(err)
	t.Logf("report: %+v", report)

	// A process that goes on: its recovery, an hour later, and its dispatcher.
	now = now.Add(time.Hour)
	_, err = turnframe.NewRecovery(store, turnframe.WithClock(clock)).Recover(ctx, turnframe.RecoveryScope{},
		diskFullNop{})
	is.NoErr(err)
	_, err = d.RunOnce(ctx, now)
	is.NoErr(err)

	rec, err := store.GetOutbox(ctx, rows[0].ID)
	is.NoErr(err)
	t.Logf("row: %v, sends: %d", rec.Status, sends)
	is.Equal(report.Completed, []turnframe.OutboxID{rows[0].ID}) // the completed send was settled once the disk freed
	is.Equal(sends, 1)                                           // and never sent again
}

type diskFullNop struct{}

func (diskFullNop) RestartInterpretation(context.Context, turnframe.TurnPhaseMarker, turnframe.RecoveryAction) error {
	return nil
}
func (diskFullNop) ResumeCommands(context.Context, turnframe.TurnPhaseMarker, turnframe.RecoveryAction) error {
	return nil
}
func (diskFullNop) RegenerateResponse(context.Context, turnframe.TurnPhaseMarker, turnframe.RecoveryAction) error {
	return nil
}
