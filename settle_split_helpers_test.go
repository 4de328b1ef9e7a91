package turnframe_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/turnframe/turnframe"
)

// splitGate stages the sweep the settle_split tests need: four rows of four
// accounts, claimed by one sweep at Concurrency 1; the first row's lone
// settlement is held until the last row was sent, so rows 1–3 queue behind
// it and settle as one batch, which the test's store then refuses, cuts or
// answers late.
type splitGate struct {
	release chan struct{} // closed by the fourth send
	called  chan struct{} // closed by the first Settle call: the settler took row 0 alone
	once    sync.Once
}

func newSplitGate() *splitGate {
	return &splitGate{release: make(chan struct{}), called: make(chan struct{})}
}

// hold goes first in the test store's Settle: the first call waits there
// until the fourth send.
func (g *splitGate) hold() {
	g.once.Do(func() { close(g.called); <-g.release })
}

// sender returns a Sender that completes every row. Its second send waits
// until the first settlement is held; its fourth runs last (nil: nothing)
// and then lets that settlement go.
func (g *splitGate) sender(last func()) turnframe.Sender {
	var mu sync.Mutex
	n := 0
	return turnframe.SenderFunc(func(context.Context, turnframe.OutboxEntry) turnframe.Dispatched {
		mu.Lock()
		n++
		k := n
		mu.Unlock()
		switch k {
		case 2:
			<-g.called
		case 4:
			if last != nil {
				last()
			}
			close(g.release)
		}
		return turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200"}
	})
}

// enqueueFour commits one row on each of four accounts and returns their ids.
func enqueueFour(t *testing.T, store turnframe.Store) []turnframe.OutboxID {
	t.Helper()
	var ids []turnframe.OutboxID
	for i, acct := range []turnframe.AccountID{"a", "b", "c", "d"} {
		rows := dispEnqueue(t, store, acct, turnframe.IdempotencyKey(fmt.Sprintf("k%d", i)), turnframe.OutboxMessage{Destination: "payments"})
		ids = append(ids, rows[0].ID)
	}
	return ids
}
