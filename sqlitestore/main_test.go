package sqlitestore_test

import (
	"os"
	"testing"

	"github.com/turnframe/turnframe/internal/sqlitefile"
)

// TestMain migrates one template file for the tests that open many empty
// stores (the conformance suite), see sqlitefile.
func TestMain(m *testing.M) { os.Exit(sqlitefile.Main(m)) }
