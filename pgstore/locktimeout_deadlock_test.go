package pgstore_test

import (
	"context"
	"net/url"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe/pgstore/pgtest"
)

// Open: "Its connections wait DefaultLockTimeout for a lock unless the url
// sets lock_timeout". A setting whose name or value merely contains the
// words (deadlock_timeout, an application_name) was taken for it: Open set
// none, and every lock wait of the store's was unbounded again.
func TestADeadlockTimeoutInOptionsIsNotALockTimeout(t *testing.T) {
	for _, tt := range []struct{ name, options string }{
		{"deadlock_timeout", "--deadlock_timeout=2s"},
		{"an application_name", "--application_name=lock_timeout_watch"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			ctx := context.Background()
			u := pgtest.WithParams(t, pgtest.Schema(t), url.Values{"options": {tt.options}})
			s := mustOpenURL(t, u)
			var got string
			is.NoErr(s.Pool().QueryRow(ctx, `SHOW lock_timeout`).Scan(&got))
			is.Equal(got, "5s") // DefaultLockTimeout: the URL set no lock_timeout
		})
	}
}
