package storetest

import (
	"errors"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// notifyTests prove turnframe.EnqueueNotifier, for a store that offers it;
// a store that does not skips them (Dispatcher.Run polls it).
func notifyTests() []test {
	return []test{
		{"ACommitThatEnqueuesRowsClosesTheEnqueuedChannel", testNotifyCommit},
		{"ARefusedWriteOrOneWithoutRowsLeavesTheEnqueuedChannelOpen", testNotifyRefused},
	}
}

// notifier returns e's store as an EnqueueNotifier, or skips the test.
func (e *env) notifier() turnframe.EnqueueNotifier {
	e.t.Helper()
	n, ok := e.s.(turnframe.EnqueueNotifier)
	if !ok {
		e.t.Skip("the store does not implement turnframe.EnqueueNotifier")
	}
	return n
}

// closed reports whether ch is closed, without waiting.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func testNotifyCommit(t *testing.T, e *env) {
	is := is.New(t)
	n := e.notifier()
	before, other := n.Enqueued(), n.Enqueued()
	is.True(!closed(before)) // open before any commit
	e.enqueue(acme, at(0), message(""))
	is.True(closed(before)) // closed by the commit that enqueued a row
	is.True(closed(other))  // every waiter of that generation sees it
	after := n.Enqueued()
	is.True(!closed(after)) // a channel taken after the commit waits for the next one
	e.enqueue(globex, at(1), message(""), message(""))
	is.True(closed(after)) // closed by the next commit with rows
}

func testNotifyRefused(t *testing.T, e *env) {
	is := is.New(t)
	n := e.notifier()
	ch := n.Enqueued()
	c := turnframe.CaseKey(e.fresh("case"))
	turn, key, attempt := e.running(acme, c, at(0))
	is.True(!closed(ch)) // beginning, admitting and taking a command enqueue nothing

	stranger := e.ids.AttemptID(at(1)) // not the attempt that holds the entry
	_, err := e.try(commitWrite(acme, turn, key, stranger, at(1), nil, []turnframe.OutboxMessage{message("")}))
	is.True(errors.Is(err, turnframe.ErrConflict)) // a commit by an attempt that does not hold the entry is refused
	is.True(!closed(ch))                           // and a refused Write with rows wakes nobody

	e.commit(acme, turn, key, attempt, at(2), []turnframe.Event{{Case: c, Type: "noted"}}, nil)
	is.True(!closed(ch)) // a commit without outbox rows wakes nobody
}
