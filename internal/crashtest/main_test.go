package crashtest_test

import (
	"testing"

	"github.com/turnframe/turnframe/internal/crashtest/harness"
)

// TestMain runs the test binary as a child of the crash harness when the
// harness started it so, and as the tests otherwise.
func TestMain(m *testing.M) { harness.Main(m, sqliteBackend{}) }
