package pgstore

import "github.com/turnframe/turnframe"

// Option configures Open and New. Each option's zero value keeps the
// default.
type Option func(*config)

type config struct {
	ids     *turnframe.IDGenerator
	retries int
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
