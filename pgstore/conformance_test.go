package pgstore_test

import (
	"testing"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/storetest"
)

// TestConformance runs the suite every turnframe.Store must pass, each
// subtest on a fresh schema of the test server.
func TestConformance(t *testing.T) {
	serverURL(t)
	storetest.Run(t, func(t *testing.T) turnframe.Store {
		return withAppTable(t, mustOpen(t))
	})
}
