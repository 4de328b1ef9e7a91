package main

import (
	"sync"
	"time"
)

// clock is the example's time: it moves only when the story moves it, so
// the transcript's times never change and a settle delay is skipped over,
// not slept through. Safe for concurrent use.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 3, 10, 9, 0, 0, 0, time.UTC)} }

// Now returns the example's current time.
func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock d forward.
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
