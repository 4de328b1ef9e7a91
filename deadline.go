package turnframe

import (
	"context"
	"errors"
	"runtime/debug"
	"sync"
	"time"
)

// A call to application code — a Handler, a Sender, a Verifier — runs on a
// goroutine of its own under a deadline, because Go cannot stop a goroutine
// from outside (DESIGN.md, "Calls under a deadline"). This file is that one
// mechanism.

// callEnd says how a bounded call ended.
type callEnd uint8

const (
	callAnswered callEnd = iota // it answered while its context was live
	callTimedOut                // its context ended first; an answer it gives after that is discarded
	callPanicked                // it panicked while its context was live; the panic did not escape
)

// bounded is the end of one call made by callWithin.
type bounded[T any] struct {
	value T
	end   callEnd
	panic any    // callPanicked: the panic's value
	stack []byte // callPanicked: where it panicked
	cause error  // callTimedOut: why the call's context ended
	// notStarted: callTimedOut because the call was stopped before f
	// started (callUnlessStopped); f never ran.
	notStarted bool
}

// callOutcome is where a bounded call and its waiter meet: the first of the
// two to take the lock decides the end, once.
type callOutcome[T any] struct {
	mu      sync.Mutex
	decided bool
	started bool // f was started
	r       bounded[T]
}

// callWithin calls f on a goroutine of its own with a context that ends at
// timeout or with ctx, and waits for whichever comes first: f's end (an
// answer or a panic) or the end of that context.
//
// What counts is when f produced its answer, never which of two channels a
// select happened to read first: f's end counts only if f's context was
// still live when f returned. An answer f gives after its context ended
// (say, a handler that honours ctx with `<-ctx.Done(); return Reject(…)`) is
// late, however soon the waiter notices, and the call timed out. An answer
// given in time counts, even when the waiter notices it only after the
// deadline. The two sides decide under one lock, so exactly one of them
// does, and a late answer is never read.
//
// f runs on its own goroutine; one that ignores its context past the
// deadline keeps running until it returns, and its end is then discarded.
// That goroutine is the only one the library leaves running.
//
// late, when not nil, is handed a late end (an answer or a panic f gave
// after its context ended) on f's goroutine, after the waiter decided: the
// answer is never read as the call's outcome, only kept as evidence.
func callWithin[T any](ctx context.Context, timeout time.Duration, f func(context.Context) T, late func(bounded[T])) bounded[T] {
	return callUnlessStopped(ctx, nil, timeout, f, late)
}

// callUnlessStopped is callWithin, except that f is never called once stop
// (when not nil) ended: a call stop ended before f started is callTimedOut
// with notStarted set, and f never runs.
func callUnlessStopped[T any](ctx, stop context.Context, timeout time.Duration, f func(context.Context) T, late func(bounded[T])) bounded[T] {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out := &callOutcome[T]{}
	stopped := func() bool { return stop != nil && stop.Err() != nil }
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		if !out.start(cctx, stopped) {
			return // stopped before it started: f is never called
		}
		r := runRecovered(cctx, f)
		if !out.settle(r, cctx) && late != nil {
			late(r) // the waiter timed the call out: evidence, never the outcome
		}
	}()
	select {
	case <-ended:
	case <-cctx.Done():
	}
	out.mu.Lock()
	defer out.mu.Unlock()
	if !out.decided {
		out.decided = true
		cause := context.Cause(cctx)
		if cause == nil { // f's goroutine ended with neither an answer nor a panic, before the deadline
			cause = errCallExited
		}
		out.r = bounded[T]{end: callTimedOut, cause: cause, notStarted: !out.started && stopped()}
	}
	return out.r
}

// errCallExited is the cause of a call whose goroutine ended without an
// answer or a panic (runtime.Goexit, as t.FailNow does): it may have acted,
// so it counts as timed out.
var errCallExited = errors.New("the call ended its goroutine without an answer (runtime.Goexit)")

// start is f's goroutine asking to call f: false, and the call's end
// decided as not started, once stopped says so; otherwise f is started
// (even when the waiter timed the call out first: its answer is then
// evidence, as any late one).
func (out *callOutcome[T]) start(cctx context.Context, stopped func() bool) bool {
	out.mu.Lock()
	defer out.mu.Unlock()
	if stopped() {
		if !out.decided {
			out.decided = true
			out.r = bounded[T]{end: callTimedOut, cause: context.Cause(cctx), notStarted: true}
		}
		return false
	}
	out.started = true
	return true
}

// settle decides the call's end from f's side, unless the waiter decided
// first, and reports whether f's end is the call's. An end f produced after
// its context ended is late: the call timed out.
func (out *callOutcome[T]) settle(r bounded[T], cctx context.Context) bool {
	out.mu.Lock()
	defer out.mu.Unlock()
	if out.decided {
		return false // the waiter gave up on it: discarded unread
	}
	out.decided = true
	if cctx.Err() != nil {
		out.r = bounded[T]{end: callTimedOut, cause: context.Cause(cctx)} // produced after the deadline: late
		return false
	}
	out.r = r
	return true
}

// runRecovered calls f(ctx) and turns a panic into its callPanicked end.
func runRecovered[T any](ctx context.Context, f func(context.Context) T) (r bounded[T]) {
	defer func() {
		if p := recover(); p != nil {
			r = bounded[T]{end: callPanicked, panic: p, stack: debug.Stack()}
		}
	}()
	return bounded[T]{value: f(ctx)}
}
