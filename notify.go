package turnframe

import "context"

// EnqueueNotifier is what a store offers, optionally, so that Dispatcher.Run
// wakes at once when this process enqueues: memstore and sqlitestore
// implement it; a store that does not is polled at
// DispatchConfig.PollInterval.
type EnqueueNotifier interface {
	// Enqueued returns a channel that is closed once a commit through this
	// store value enqueues outbox rows (an Apply with Outbox rows), after
	// the call. A Write that is refused, or that enqueues nothing, does not
	// close it. Each call may return a new channel: take it before looking
	// for due rows, so a commit between the look and the wait is not
	// missed. Commits by another process, or another store value on the
	// same file, do not close it (Run's poll finds them). Close closes it
	// too, so a waiter learns at once that the store closed: its next call
	// is ErrClosed. Safe for concurrent use.
	Enqueued() <-chan struct{}
}

// EnqueueListener is what a store offers, optionally, so that Dispatcher.Run
// wakes at once when any process enqueues on the same database: pgstore
// implements it (PostgreSQL's LISTEN and NOTIFY). Run prefers it to
// EnqueueNotifier, which sees only this store value's commits.
type EnqueueListener interface {
	// ListenEnqueued starts listening and returns wake, which receives a
	// value (it is buffered, holding one) after each commit, by any
	// process, that enqueued outbox rows; several may be merged into one.
	// wake is closed when listening ends: at stop, when ctx ends, or when
	// the listener failed (a lost connection), which Run then logs,
	// polling meanwhile and listening again with backoff. stop ends
	// listening and returns only once everything ListenEnqueued started
	// has ended, with the error that ended it (nil for stop or ctx);
	// calling it twice is safe. Commits made while nothing listens are not
	// announced: look for due rows after ListenEnqueued returns. On error
	// nothing was started. ListenEnqueued itself returns once ctx ends, at
	// the latest (Dispatcher.Run listens on a goroutine of its own, claiming
	// meanwhile, and waits for that goroutine before it returns).
	ListenEnqueued(ctx context.Context) (wake <-chan struct{}, stop func() error, err error)
}
