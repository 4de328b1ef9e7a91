package pgstore_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
)

// startingServer listens on loopback and answers every connection's
// startup as PostgreSQL does while it starts, shuts down or replays its
// log: FATAL 57P03, cannot_connect_now. It returns a URL to it, and stops
// when t ends.
func startingServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			refuseStartup(c)
		}
	}()
	return "postgres://turnframe@" + ln.Addr().String() + "/turnframe_test?sslmode=disable&connect_timeout=5"
}

// refuseStartup reads a connection's startup message and answers it with
// 57P03, then closes it.
func refuseStartup(c net.Conn) {
	defer c.Close()
	b := pgproto3.NewBackend(c, c)
	if _, err := b.ReceiveStartupMessage(); err != nil {
		return
	}
	b.Send(&pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "57P03",
		Message: "the database system is starting up"})
	_ = b.Flush()
}

// An application that starts with its database (containers started
// together, a server restarting) meets a server that answers "the database
// system is starting up" (57P03, cannot_connect_now) until it is ready.
// The server says: not now. Open returned the driver's error bare, none of
// the sentinels, so an application that tries Open again on ErrBusy gave
// up at once, though nothing was wrong with its URL. It is ErrBusy, as
// for the same refusal once open; a server that refuses for good (a role
// or database it does not know) stays not busy
// (TestOpenRefusedForGoodIsNotBusy).
func TestOpenOnAServerThatIsStartingUpIsBusy(t *testing.T) {
	is := is.New(t)
	s, err := pgstore.Open(context.Background(), startingServer(t))
	if err == nil {
		s.Close()
	}
	t.Logf("open while the server starts: %v", err)
	is.True(errors.Is(err, turnframe.ErrBusy))            // try again in a moment
	is.True(strings.Contains(err.Error(), "starting up")) // in the server's words
	is.True(!errors.Is(err, turnframe.ErrInvalid))        // the URL is fine
}
