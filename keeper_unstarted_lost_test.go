package turnframe_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// rowLog keeps every record logged about an outbox row, by level, and
// closes taken once the keeper has taken row's lost claim in (it logs it,
// at one level or another, after marking it).
type rowLog struct {
	row   turnframe.OutboxID
	taken chan struct{}
	once  sync.Once
	mu    sync.Mutex
	lines []string
}

func (h *rowLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *rowLog) Handle(_ context.Context, r slog.Record) error {
	id := ""
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "outbox_id" {
			id = a.Value.String()
		}
		return true
	})
	if id != h.row.String() {
		return nil
	}
	h.mu.Lock()
	h.lines = append(h.lines, r.Level.String()+" "+r.Message)
	h.mu.Unlock()
	if strings.Contains(r.Message, "claim") {
		h.once.Do(func() { close(h.taken) })
	}
	return nil
}
func (h *rowLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *rowLog) WithGroup(string) slog.Handler      { return h }

// DESIGN.md §8: the keeper says "may be sent twice" only while the row's
// send may still run. A row still waiting for a sender when an operator
// released it is marked lost and never sent, yet the keeper logged at error
// level that it "may be sent twice": it knew only whether a send was over,
// not whether one had started.
func TestAnUnstartedRowWhoseClaimIsLostIsNotCalledSentTwice(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		entries := dispEnqueue(t, store, rtAccount, "k1", dispMessages(2, "bakery", "")...)
		second := entries[1].ID
		cfg := turnframe.DispatchConfig{WorkerID: "w1", Concurrency: 1, SendTimeout: time.Hour, LeaseMargin: 10 * time.Millisecond}
		logs := &rowLog{row: second, taken: make(chan struct{})}
		var sent []turnframe.OutboxID
		sender := turnframe.SenderFunc(func(_ context.Context, e turnframe.OutboxEntry) turnframe.Dispatched {
			sent = append(sent, e.ID)
			if len(sent) == 1 {
				// An operator releases the row waiting behind this send; the
				// keeper takes its lost claim in before this send ends.
				is.NoErr(store.ReleaseClaim(context.Background(), second, 1, dispNow))
				await(t, (<-chan struct{})(logs.taken), "the keeper takes the waiting row's lost claim in")
			}
			return turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200"}
		})
		d := turnframe.NewDispatcher(store, sender, cfg, turnframe.WithLogger(slog.New(logs)))
		_, err := d.RunOnce(context.Background(), dispNow)
		is.NoErr(err)
		is.Equal(len(sent), 1) // the released row was never sent by this sweep
		logs.mu.Lock()
		defer logs.mu.Unlock()
		for _, line := range logs.lines {
			t.Log(line)
			is.True(!strings.Contains(line, "may be sent twice")) // its send never ran, nor will
		}
	})
}
