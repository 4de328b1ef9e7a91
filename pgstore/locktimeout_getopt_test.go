package pgstore_test

import (
	"context"
	"net/url"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe/pgstore"
	"github.com/turnframe/turnframe/pgstore/pgtest"
)

// The server reads options with getopt, so flags without an argument may
// precede c in one word: "-eclock_timeout=1234" sets lock_timeout.
// SetsSetting missed it, and Open's own lock_timeout, a startup parameter
// the server applies after options, overrode the URL's.
func TestALockTimeoutInCombinedOptionFlagsIsKept(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	u := pgtest.WithParams(t, pgtest.Schema(t), url.Values{"options": {"-eclock_timeout=1234"}})
	s := mustOpenURL(t, u)
	var got string
	is.NoErr(s.Pool().QueryRow(ctx, `SHOW lock_timeout`).Scan(&got))
	is.Equal(got, "1234ms") // the URL's
	is.True(pgstore.SetsSetting(map[string]string{"options": "-eclock_timeout=1234"}, "lock_timeout"))
}
