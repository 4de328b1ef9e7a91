package pgstore

import "github.com/turnframe/turnframe"

var _ turnframe.EnqueueNotifier = (*Store)(nil)

// Enqueued returns a channel closed by the next Apply of this Store value
// that enqueues outbox rows, after its commit (turnframe.EnqueueNotifier). A
// refused Write, or one without rows, leaves it open; so do ApplyTx (its
// rows are not claimable before the caller commits) and Close. Another
// Store value or process on the same database does not close it: a
// dispatcher hears those through ListenEnqueued, which Dispatcher.Run
// prefers, or finds them at its poll.
func (s *Store) Enqueued() <-chan struct{} { return s.enqueued.Wait() }

// notifyEnqueued wakes the waiters of Enqueued if applied enqueued rows.
func (s *Store) notifyEnqueued(applied turnframe.Applied) {
	if len(applied.Outbox) > 0 {
		s.enqueued.Signal()
	}
}
