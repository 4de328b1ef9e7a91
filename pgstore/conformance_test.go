package pgstore_test

import (
	"testing"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
	"github.com/turnframe/turnframe/pgstore/pgtest"
	"github.com/turnframe/turnframe/storetest"
)

// TestConformance runs the suite every turnframe.Store must pass, each
// subtest on a fresh schema of the test server, with the store on the
// caller's clock: the suite steps a fixed clock past leases and compares
// the times it reads back with the ones it gave, which the database's
// clock, running under the store, would defeat. The database clock is
// proved by the tests of clock_test.go.
func TestConformance(t *testing.T) {
	pgtest.ServerURL(t)
	storetest.Run(t, func(t *testing.T) turnframe.Store {
		return withAppTable(t, mustOpen(t, pgstore.WithClock(pgstore.CallerClock)))
	})
}
