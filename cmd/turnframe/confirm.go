package main

import (
	"errors"
	"fmt"
	"io"
)

// confirmation is the stdout a command that writes (settle, requeue,
// approve, deny, release, prune, migrate) says what it did on, once it has
// done it. It keeps the first error of a write to it (a full disk, a pipe
// whose reader went away) and fails every write after; done turns that
// error into an unreportedError.
type confirmation struct {
	stickyWriter
	look string // how the operator finds out what was done instead
}

// confirm returns the confirmation of a change made, written to e's
// stdout; look says how to find out what was done when the confirmation
// cannot be written ("'turnframe show ID'").
func confirm(e *env, look string) *confirmation {
	return &confirmation{stickyWriter: stickyWriter{w: e.stdout}, look: look}
}

// stickyWriter writes to w until a write fails, and keeps that error
// (err): every write after it fails with it too, so a text printed in many
// writes is either whole or known not to be.
type stickyWriter struct {
	w   io.Writer
	err error
}

func (s *stickyWriter) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.w.Write(p)
	if err != nil {
		s.err = err
	}
	return n, err
}

// done returns nil when everything written to c was written, and an
// unreportedError otherwise.
func (c *confirmation) done() error {
	if c.err == nil {
		return nil
	}
	return &unreportedError{err: c.err, look: c.look}
}

// doneWith is done for a command that did part of what it was asked and
// failed on the rest (failed): failed, which sets the exit status, with
// the write's error beside it, if any.
func (c *confirmation) doneWith(failed error) error {
	switch {
	case failed == nil:
		return c.done()
	case c.err != nil:
		return errors.Join(failed, fmt.Errorf("what was done could not be written either (%w); %s says what it was", c.err, c.look))
	}
	return failed
}

// unreportedError is a change a command made whose confirmation it could
// not write: the change stands, and running the command again is no way to
// find out what it did (it would be refused, or do it twice). It exits
// exitUnreported, neither success nor "could not be done".
type unreportedError struct {
	err  error
	look string
}

func (u *unreportedError) Error() string {
	return fmt.Sprintf("done: the change was made, but its confirmation could not be written (%v); "+
		"do not run the command again to see it: %s says what was done", u.err, u.look)
}

func (u *unreportedError) Unwrap() error { return u.err }
