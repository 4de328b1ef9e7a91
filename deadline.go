package turnframe

import (
	"context"
	"runtime/debug"
	"time"
)

// A call to application code — a Handler, a Sender, a Reconciler — runs on a
// goroutine of its own under a deadline, because Go cannot stop a goroutine
// from outside (DESIGN §1). This file is that one mechanism.

// callEnd says how a bounded call ended.
type callEnd uint8

const (
	callAnswered callEnd = iota // it returned in time (or just as the deadline came)
	callTimedOut                // ctx ended or the timeout came first; any later answer is discarded
	callPanicked                // it panicked; the panic did not escape
)

// bounded is the end of one call made by callWithin.
type bounded[T any] struct {
	value T
	end   callEnd
	panic any    // callPanicked: the panic's value
	stack []byte // callPanicked: where it panicked
	cause error  // callTimedOut: why the call's context ended
}

// callWithin calls f on a goroutine of its own with a context that ends at
// timeout or with ctx, and waits for whichever comes first: f's answer, its
// panic, or the end of that context. An answer already there when the
// context ends still counts: an answer is knowledge. The channel f answers
// on is buffered, so an f that ignores its context past the deadline writes
// its late answer where nobody reads it, and its goroutine ends when f
// returns; that goroutine is the only one the library leaves running.
func callWithin[T any](ctx context.Context, timeout time.Duration, f func(context.Context) T) bounded[T] {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	done := make(chan bounded[T], 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- bounded[T]{end: callPanicked, panic: p, stack: debug.Stack()}
			}
		}()
		done <- bounded[T]{value: f(cctx)}
	}()
	select {
	case r := <-done:
		return r
	case <-cctx.Done():
		select {
		case r := <-done:
			return r
		default:
			return bounded[T]{end: callTimedOut, cause: context.Cause(cctx)}
		}
	}
}
