package pgstore_test

import (
	"context"
	"net/url"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe/pgstore/pgtest"
)

// Open: "Its connections wait DefaultLockTimeout for a lock unless the url
// sets lock_timeout (0: for ever)". A URL may set it as libpq and pgx read
// it, in options (--lock_timeout=..., as -c does): Open's own lock_timeout
// parameter, sent after it in the startup packet, used to override what
// the URL set.
func TestALockTimeoutTheURLSetsInOptionsIsKept(t *testing.T) {
	for _, tt := range []struct{ name, options, want string }{
		{"for ever", "--lock_timeout=0", "0"},
		{"a minute", "--lock_timeout=60000", "1min"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			ctx := context.Background()
			u := pgtest.WithParams(t, pgtest.Schema(t), url.Values{"options": {tt.options}})
			s := mustOpenURL(t, u)
			var got string
			is.NoErr(s.Pool().QueryRow(ctx, `SHOW lock_timeout`).Scan(&got))
			is.Equal(got, tt.want) // the URL's lock_timeout
		})
	}
}
