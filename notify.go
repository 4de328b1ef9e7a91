package turnframe

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
	// same file, do not close it (Run's poll finds them). Safe for
	// concurrent use.
	Enqueued() <-chan struct{}
}
