package turnframe

import (
	"errors"
	"fmt"
)

// The sentinel errors. An error a turnframe call returns wraps one of them
// with context, or none for an error no sentinel describes; test with
// errors.Is. Stores translate their driver's errors into these at their
// boundary. Two cases wrap two, each documented where it arises: ErrClosed
// with the error of a call the store's closing cut short, and ErrAppWrite
// with ErrBusy when the application's statement was refused for a lock
// another session held (pgstore): the transaction rolled back, and the same
// Write may be tried again.
var (
	// ErrNotFound: the row does not exist, or it belongs to another account.
	// The two cases are indistinguishable on purpose, so one tenant cannot
	// learn about another's rows.
	ErrNotFound = errors.New("turnframe: not found")

	// ErrConflict: a transition the state machine refuses, a case revision
	// that moved since it was read, or an idempotency key reused for a
	// different command. Nothing was written.
	ErrConflict = errors.New("turnframe: conflict")

	// ErrClaimLost: a settlement from a worker that no longer holds the claim
	// on an outbox row (it expired and was released, another worker claimed
	// it, or the row was already settled). Nothing was written.
	ErrClaimLost = errors.New("turnframe: claim lost")

	// ErrInvalid: bad input. Nothing was written by the call that found it,
	// before any transaction started, except where a call documents
	// otherwise (Runtime.Execute for a Handler's invalid Outcome: its entry
	// was taken first). The error is an *InvalidError naming the field, or
	// (pgstore) the server's refusal of a value it cannot store.
	ErrInvalid = errors.New("turnframe: invalid input")

	// ErrClosed: the store was closed.
	ErrClosed = errors.New("turnframe: store closed")

	// ErrBusy: the store could not take the call now, because another
	// writer (another Store, another process) held it for longer than the
	// store waits, or the server or the file system refused it for want of
	// a resource that may come back (a full disk, a dropped connection).
	// Nothing was written, and the same call may be tried again: it is the
	// one transient error, and the Dispatcher retries a settlement that
	// meets it, as Execute retries a command's outcome.
	ErrBusy = errors.New("turnframe: store busy")

	// ErrAppWrite: the application's own writes (Write.App) returned an
	// error, so nothing of the Write was written. The app's error is
	// wrapped too, and stays errors.Is-able; a store does not translate
	// it (an app's UNIQUE violation is not ErrConflict).
	ErrAppWrite = errors.New("turnframe: the application's writes failed")
)

// InvalidError is the error for bad input: Field names what was wrong, in the
// caller's terms ("write.admit[1].key"), and Reason says how. It wraps
// ErrInvalid, so errors.Is(err, ErrInvalid) holds.
type InvalidError struct {
	Field  string
	Reason string
}

// Error returns "turnframe: invalid input: FIELD: REASON".
func (e *InvalidError) Error() string {
	return fmt.Sprintf("%v: %s: %s", ErrInvalid, e.Field, e.Reason)
}

// Unwrap returns ErrInvalid.
func (e *InvalidError) Unwrap() error { return ErrInvalid }

func invalid(field, format string, args ...any) error {
	return &InvalidError{Field: field, Reason: fmt.Sprintf(format, args...)}
}
