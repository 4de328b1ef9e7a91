package pgstore

import (
	"time"

	"github.com/turnframe/turnframe"
)

// Option configures Open and New. Each option's zero value keeps the
// default.
type Option func(*config)

type config struct {
	ids      *turnframe.IDGenerator
	retries  int
	clock    Clock
	host     func() time.Time
	existing bool // WithExisting: check the schema, never migrate
}

// DefaultRetries is how many times a write transaction is run again after
// PostgreSQL broke a deadlock or refused it with a serialization failure,
// before the call fails with turnframe.ErrBusy.
const DefaultRetries = 8

func newConfig(opts []Option) config {
	c := config{retries: DefaultRetries}
	for _, opt := range opts {
		opt(&c)
	}
	if c.ids == nil {
		c.ids = turnframe.NewIDGenerator()
	}
	if c.host == nil {
		c.host = time.Now
	}
	return c
}

// WithIDGenerator draws event and outbox ids from g, for tests that need
// reproducible ids. A nil g keeps the default, turnframe.NewIDGenerator().
func WithIDGenerator(g *turnframe.IDGenerator) Option {
	return func(c *config) { c.ids = g }
}

// WithRetries sets how many times a write is run again after a deadlock or
// a serialization failure (default DefaultRetries); a negative n keeps the
// default, 0 never retries.
func WithRetries(n int) Option {
	return func(c *config) {
		if n >= 0 {
			c.retries = n
		}
	}
}

// WithClock chooses the clock leases and due times are measured on: the
// database's (DatabaseClock, the default) or each caller's (CallerClock).
// An unknown value keeps the default.
func WithClock(c Clock) Option {
	return func(cfg *config) {
		if c == DatabaseClock || c == CallerClock {
			cfg.clock = c
		}
	}
}

// WithHostClock sets the clock that stands for the caller's in DatabaseClock
// mode for a call that carries no time of its own — a read, Requeue's at,
// Prune's cut-off, RecoveryScope.UpdatedBefore — so the times it gives and
// returns are in that clock's frame. Give it the clock the application's
// Runtime and Dispatcher run on (turnframe.WithClock), when that is not the
// host's. Default: time.Now; nil keeps it. CallerClock mode never reads it.
func WithHostClock(now func() time.Time) Option {
	return func(c *config) {
		if now != nil {
			c.host = now
		}
	}
}
