package sqlitestore

import "github.com/turnframe/turnframe"

var _ turnframe.EnqueueNotifier = (*Store)(nil)

// Enqueued returns a channel closed by the next Apply or ApplyTx of this
// Store value that enqueues outbox rows (turnframe.EnqueueNotifier). A
// refused Write, or one without rows, leaves it open. Close closes it, so
// that a Dispatcher.Run waiting on it finds the store closed at once.
// Another Store value or process on the same file does not close it.
//
// Apply closes it after its commit. ApplyTx closes it when the Write landed
// in the caller's transaction, before the caller commits: a
// turnframe.Dispatcher on this Store claims through the one writer
// connection, which the caller's transaction holds, so its claim waits for
// the commit and then sees the rows. A caller that rolls back instead has
// caused one wake-up that finds nothing.
func (s *Store) Enqueued() <-chan struct{} { return s.enqueued.Wait() }

// notifyEnqueued wakes the waiters of Enqueued if applied enqueued rows.
func (s *Store) notifyEnqueued(applied turnframe.Applied) {
	if len(applied.Outbox) > 0 {
		s.enqueued.Signal()
	}
}
