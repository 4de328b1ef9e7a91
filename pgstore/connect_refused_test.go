package pgstore_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
	"github.com/turnframe/turnframe/pgstore/pgtest"
)

// A server that refuses the connection for good — a database that does not
// exist, a role it does not know — is not a busy store: ErrBusy tells a
// caller to try again, and a retry loop would then wait forever on a typo
// in its URL. The error says what the server said, and is none of the
// sentinels a caller retries on.
func TestOpenRefusedForGoodIsNotBusy(t *testing.T) {
	server := pgtest.ServerURL(t)
	for _, tt := range []struct {
		name string
		edit func(u *url.URL)
		says string // in the error: the server's own words
	}{
		{"ADatabaseThatDoesNotExist", func(u *url.URL) { u.Path = "/turnframe_no_such_database" }, "turnframe_no_such_database"},
		{"ARoleTheServerDoesNotKnow", func(u *url.URL) { u.User = url.User("turnframe_no_such_role") }, "turnframe_no_such_role"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			u, err := url.Parse(server)
			is.NoErr(err)
			tt.edit(u)
			s, err := pgstore.Open(context.Background(), u.String())
			if err == nil {
				s.Close()
			}
			is.True(err != nil)                             // refused
			is.True(!errors.Is(err, turnframe.ErrBusy))     // not something to wait out
			is.True(!errors.Is(err, turnframe.ErrClosed))   // nor a closed store
			is.True(strings.Contains(err.Error(), tt.says)) // names what was refused
			t.Log(err)
		})
	}
}
