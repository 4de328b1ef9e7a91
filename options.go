package turnframe

import (
	"context"
	"log/slog"
	"time"
)

// Option configures New, NewDispatcher or NewRecovery. An option that does
// not concern a constructor is ignored by it (WithCommandTimeout means
// nothing to a Dispatcher).
type Option func(*settings)

type settings struct {
	observer           Observer
	logger             *slog.Logger
	clock              func() time.Time
	ids                *IDGenerator
	commandTimeout     time.Duration
	leaseMargin        time.Duration
	maxConflictRetries int
	destinations       map[string]Remote                // WithDestination
	commands           map[string]Remote                // WithCommand
	local              map[string]bool                  // WithLocalCommand
	limits             Limits                           // WithLimits; every field resolved
	traceContext       func(ctx context.Context) string // WithTraceContext; nil: none
}

// Defaults of the options.
const (
	DefaultCommandTimeout     = 30 * time.Second
	DefaultMaxConflictRetries = 3
)

func newSettings(opts []Option) settings {
	s := settings{
		observer:           discard{},
		logger:             defaultLogger(),
		clock:              time.Now,
		commandTimeout:     DefaultCommandTimeout,
		leaseMargin:        DefaultLeaseMargin,
		maxConflictRetries: DefaultMaxConflictRetries,
		limits:             DefaultLimits(),
	}
	for _, opt := range opts {
		opt(&s)
	}
	if s.ids == nil {
		s.ids = NewIDGenerator()
	}
	return s
}

func (s settings) observe() observer { return observer{obs: s.observer, log: s.logger} }

// commandLease is how long an attempt holds its journal entry at a time: the
// command timeout and the lease margin, at most maxLease (a timeout of
// math.MaxInt64, "no timeout", must not overflow into a negative lease).
func (s settings) commandLease() time.Duration {
	if s.commandTimeout > maxLease-s.leaseMargin {
		return maxLease
	}
	return min(s.commandTimeout+s.leaseMargin, maxLease)
}

// maxLease bounds a command's lease: a hundred years, far past any
// deadline, and far from overflowing a time.Time's arithmetic.
const maxLease = 100 * 365 * 24 * time.Hour

// now returns the clock's time in UTC, truncated to the microsecond the
// stores keep, so what a caller holds equals what it reads back.
func (s settings) now() time.Time { return s.clock().UTC().Truncate(time.Microsecond) }

// WithObserver sends signals to o. A nil o — a nil pointer or func behind
// the interface too, its constructor having failed — keeps the default,
// which discards.
func WithObserver(o Observer) Option {
	return func(s *settings) {
		if !isNil(o) {
			s.observer = o
		}
	}
}

// WithLogger logs through l, every level included. A nil l keeps the
// default: warnings and errors to slog.Default(), nothing else.
func WithLogger(l *slog.Logger) Option {
	return func(s *settings) {
		if l != nil {
			s.logger = l
		}
	}
}

// WithClock reads the time from now instead of time.Now, for tests and
// replays. A nil now keeps time.Now. One clock serves New, NewDispatcher and
// NewRecovery alike: every time they read that no argument gives them comes
// from it — each write of a Runtime; a Dispatcher's Run, the lease
// extensions of a sweep (RunOnce's now plus the time the clock says passed
// since the claim), the latency it observes and the late answers it
// records; Recovery's expiries, policy steps and settlements. A now
// argument (RunOnce's) is taken as given. Deadlines of real I/O — a
// call's timeout, HTTPSender's connect budget — are the real clock's.
// A clock that jumps (a test's clock moved by hand) is stepped, like a
// machine's: a live sweep or Execute follows the jump within a second by
// extending its leases, so moving the clock past a lease does not make a
// live holder look dead, except to a release that reads it in that second
// (DESIGN.md, "One clock").
func WithClock(now func() time.Time) Option {
	return func(s *settings) {
		if now != nil {
			s.clock = now
		}
	}
}

// WithIDGenerator makes turn, conversation and attempt ids with g, for tests
// that need reproducible ids. A nil g keeps a generator over crypto/rand.
func WithIDGenerator(g *IDGenerator) Option {
	return func(s *settings) {
		if g != nil {
			s.ids = g
		}
	}
}

// WithCommandTimeout bounds each handler call of Runtime.Execute (default
// 30 s). A handler that has not returned by then is outcome unknown. It is
// also the margin a rerun of a command at a remote that deduplicates must
// leave before the remote forgets its key (see Remote): give NewRecovery
// the same, so that it judges a dead attempt as Execute does. A
// non-positive d keeps the default.
func WithCommandTimeout(d time.Duration) Option {
	return func(s *settings) {
		if d > 0 {
			s.commandTimeout = d
		}
	}
}

// WithLeaseMargin sets how long an attempt's hold on its journal entry runs
// past the command timeout (default DefaultLeaseMargin, 30 s): Execute
// leases an entry for the command timeout plus this margin, and renews the
// lease before it runs the handler again. Until the lease ends no other
// Execute — in this process or another — takes the command over, so a
// command runs in at most one place at a time; after it ends, one may (the
// process is taken for dead, and the command is resumed by key). The lease
// is judged on the wall clock (WithClock's), while the handler's deadline
// is on the monotonic one: a wall clock stepped forward by more than the
// margin while a handler runs (an NTP step; a laptop resumed from sleep)
// makes the live attempt look dead. While the handler runs, Execute looks
// every second for such a step and renews the lease at once when it ends
// within half the margin; another process's Execute may take the command
// over in that second. See DESIGN.md, "One clock". A non-positive d keeps
// the default.
func WithLeaseMargin(d time.Duration) Option {
	return func(s *settings) {
		if d > 0 {
			s.leaseMargin = d
		}
	}
}

// WithMaxConflictRetries bounds how often Runtime.Execute re-runs a handler
// whose case moved meanwhile (default 3). A negative n keeps the default; 0
// means no re-run.
func WithMaxConflictRetries(n int) Option {
	return func(s *settings) {
		if n >= 0 {
			s.maxConflictRetries = n
		}
	}
}

// WithLimits bounds the input a Runtime takes (see Limits): each zero field
// keeps its default (DefaultLimits). It panics, when called, if a field is
// negative or over its ceiling (MaxTextLen, MaxPayloadLen, …): that is a
// programming error, found at start-up.
func WithLimits(l Limits) Option {
	l = l.resolved()
	return func(s *settings) { s.limits = l }
}
