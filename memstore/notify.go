package memstore

import "github.com/turnframe/turnframe"

var _ turnframe.EnqueueNotifier = (*Store)(nil)

// Enqueued returns a channel closed by the next Apply that enqueues outbox
// rows, once it committed (turnframe.EnqueueNotifier). A refused Apply, or
// one without rows, leaves it open. Close closes it, so that a
// Dispatcher.Run waiting on it finds the store closed at once.
func (s *Store) Enqueued() <-chan struct{} { return s.enqueued.Wait() }
