package turnframe

import "context"

// Tx is a store's open write transaction, as the application's own writes
// (Write.App, Outcome.With) see it: they write the app's rows through it, in
// the transaction that writes the Write, so the rows commit together with
// the journal settlement, the events, the outbox rows and the phase move, or
// not at all.
//
// Each store documents what its Tx holds and how to reach it:
// sqlitestore.SQLTx returns the *sql.Tx of the Write's BEGIN IMMEDIATE
// transaction, for the app's own tables in the same file; memstore.AppTxOf
// returns a small transactional key/value area, for application tests. A Tx
// is valid only during the call it is handed to.
type Tx interface {
	// Backend names the kind of store whose transaction this is: "sqlite"
	// or "memory" for the stores of this module.
	Backend() string
}

// AppWrites writes the application's own rows through tx, in the
// transaction of one Write. It returns nil to let the Write commit, or an
// error to write nothing at all: the Write's Apply then returns an error
// wrapping ErrAppWrite and the returned error.
//
// It runs on the goroutine of Apply, after every check of the Write passed
// and every part of it was staged, and before the commit; it is called at
// most once per Apply, and never for a Write the store refused (ErrInvalid,
// ErrNotFound, ErrConflict, ...). It must not call the Store it runs in (the
// store's write lock is held: a call deadlocks) and should be short: no
// other write of the store proceeds while it runs. A panic rolls the Write
// back and goes on up through Apply.
type AppWrites func(ctx context.Context, tx Tx) error

// With returns the Commit o carrying f, the application's own writes, which
// Runtime.Execute runs in the transaction that writes the commit (Write.App):
// the app's rows commit with the command's Committed entry, its events and
// its outbox rows, or none of them does. An error from f, like a commit the
// store refuses, writes nothing and leaves the entry Executing under its
// attempt (a local command's Pending), as a crash before the commit does
// (Runtime.Execute). Calling With
// again adds writes that run after the earlier ones; a nil f adds nothing.
//
// With panics if o is not a Commit: a Reject or an Unknown took no effect
// the app could record, and writing rows for one is a programming error.
// (Inside a Handler, the panic makes the call's outcome unknown.)
func (o Outcome) With(f AppWrites) Outcome {
	if o.kind != OutcomeCommit {
		panic("turnframe: Outcome.With on a " + o.kind.String() + " outcome; only a Commit carries the app's writes")
	}
	if f == nil {
		return o
	}
	if prev := o.app; prev != nil {
		o.app = func(ctx context.Context, tx Tx) error {
			if err := prev(ctx, tx); err != nil {
				return err
			}
			return f(ctx, tx)
		}
		return o
	}
	o.app = f
	return o
}
