package main

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/matryer/is"
)

// DESIGN §13 (the CLI on PostgreSQL): "The URL gets, unless it sets them,
// statement_timeout 30 s, lock_timeout = --busy-timeout". A URL that sets
// lock_timeout in options (-c/--lock_timeout=…, as libpq and pgx read it)
// got the CLI's own lock_timeout parameter too, which overrode it.
func TestPGCLIKeepsALockTimeoutTheURLSetsInOptions(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	f := mustPGFixture(t)
	u, err := url.Parse(f.path)
	is.NoErr(err)
	q := u.Query()
	q.Set("options", "--lock_timeout=60000")
	u.RawQuery = q.Encode()
	ops, err := openPG(ctx, u.String(), 200*time.Millisecond, time.Now)
	is.NoErr(err)
	defer ops.Close()
	var got string
	is.NoErr(ops.Pool().QueryRow(ctx, `SHOW lock_timeout`).Scan(&got))
	is.Equal(got, "1min") // the URL's lock_timeout, not --busy-timeout's
}
