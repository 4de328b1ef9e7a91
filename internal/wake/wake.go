// Package wake is the broadcast both stores use to tell a waiting
// Dispatcher.Run that a commit enqueued outbox rows
// (turnframe.EnqueueNotifier). It is one small type so that the rule lives
// once: a generation channel, closed at the next signal.
package wake

import "sync"

// Broadcast hands out channels that are closed at the next Signal: every
// waiter that took a channel before a Signal sees it closed; a waiter that
// takes one after gets a fresh channel. The zero value is ready to use. It
// is safe for concurrent use.
type Broadcast struct {
	mu sync.Mutex
	ch chan struct{}
}

// Wait returns the channel the next Signal closes.
func (b *Broadcast) Wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	return b.ch
}

// Signal closes the channel Wait handed out, if any, and starts a new
// generation. It never blocks.
func (b *Broadcast) Signal() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch != nil {
		close(b.ch)
		b.ch = nil
	}
}
