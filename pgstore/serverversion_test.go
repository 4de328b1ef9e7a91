package pgstore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
)

// pgstore needs PostgreSQL 13 (pg_xact_status, to tell whether a write
// whose COMMIT went unanswered landed). An older server is refused at Open,
// by name, before anything is created, instead of every write failing on
// a function the server lacks. The servers CI runs are newer, so the rule
// is tested on the numbers server_version_num gives.
func TestAServerOlderThan13IsRefusedByItsVersion(t *testing.T) {
	for _, tt := range []struct {
		num     int
		version string
		ok      bool
	}{
		{90624, "9.6.24", false},
		{120022, "12.22", false},
		{130000, "13.0", true},
		{150018, "15.18 (Debian 15.18-0+deb12u1)", true},
		{170002, "17.2", true},
	} {
		t.Run(tt.version, func(t *testing.T) {
			is := is.New(t)
			err := pgstore.CheckServerVersion(tt.num, tt.version)
			is.Equal(err == nil, tt.ok) // 13 and later run
			if !tt.ok {
				is.True(errors.Is(err, turnframe.ErrInvalid))           // not something to wait out
				is.True(strings.Contains(err.Error(), tt.version))      // names the server's version
				is.True(strings.Contains(err.Error(), "PostgreSQL 13")) // and the one needed
			}
		})
	}
}
