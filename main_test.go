package turnframe_test

import (
	"os"
	"testing"

	"github.com/turnframe/turnframe/internal/sqlitefile"
)

// TestMain migrates one template file that the tests opening many empty
// SQLite stores copy (sqlitefile) instead of migrating each.
func TestMain(m *testing.M) { os.Exit(sqlitefile.Main(m)) }
