package storekit

import (
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/turnframe/turnframe"
)

// invalid returns ErrInvalid naming field, as the root package's checks do.
func invalid(field, format string, args ...any) error {
	return &turnframe.InvalidError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// orApp is the actor a Write or a Resolution names: "" is ActorApp.
func orApp(a turnframe.Actor) turnframe.Actor {
	if a == "" {
		return turnframe.ActorApp
	}
	return a
}

// leaseEnd is when a lease of length lease taken at now ends, cut to the
// microsecond the stores keep, so what a rule returns is what a read returns.
func leaseEnd(now time.Time, lease time.Duration) time.Time {
	return now.Add(lease).Truncate(time.Microsecond)
}

// clip cuts s to at most n bytes, at a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
