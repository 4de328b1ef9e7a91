package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

// between returns the text between the lines begin and end of text.
func between(t *testing.T, text, begin, end string) string {
	t.Helper()
	_, after, ok := strings.Cut(text, begin+"\n")
	if !ok {
		t.Fatalf("no %q", begin)
	}
	inside, _, ok := strings.Cut(after, end)
	if !ok {
		t.Fatalf("no %q after %q", end, begin)
	}
	return strings.TrimSpace(inside)
}

func TestReadmeQuickStart(t *testing.T) {
	t.Run("TheREADMEShowsTheCompiledCode", func(t *testing.T) {
		is := is.New(t)
		readme, err := os.ReadFile("../../README.md")
		is.NoErr(err)
		src, err := os.ReadFile("quickstart_test.go")
		is.NoErr(err)
		shown := between(t, string(readme), "```go", "```")
		compiled := between(t, string(src), "// README:begin", "// README:end")
		is.Equal(shown, compiled) // README.md's quick start is quickstart_test.go's
	})
	t.Run("ItRunsAndChargesOnce", func(t *testing.T) {
		is := is.New(t)
		t.Chdir(t.TempDir()) // the quick start writes app.db in the working directory
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var mu sync.Mutex
		keys := map[string]int{}
		charged := make(chan struct{}, 1)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			keys[r.Header.Get("Idempotency-Key")]++
			mu.Unlock()
			w.WriteHeader(http.StatusOK)
			select {
			case charged <- struct{}{}:
			default:
			}
		}))
		defer srv.Close()

		done := make(chan error, 1)
		go func() { done <- quickstart(ctx, srv.URL) }()
		select {
		case <-charged: // the turn ran and its charge reached the server: stop the loop
		case err := <-done:
			t.Fatalf("the quick start returned before sending: %v", err)
		}
		cancel()
		is.NoErr(<-done)

		store, err := sqlitestore.Open(context.Background(), "app.db", sqlitestore.WithExisting())
		is.NoErr(err)
		defer store.Close()
		turns, err := store.ListUnfinishedTurns(context.Background(), turnframe.RecoveryScope{}, 10)
		is.NoErr(err)
		is.Equal(len(turns), 0) // the turn was delivered
		tx, err := store.BeginTx(context.Background())
		is.NoErr(err)
		var bookings int
		is.NoErr(tx.QueryRow(`SELECT count(*) FROM bookings WHERE booking = 'booking/42'`).Scan(&bookings))
		is.NoErr(tx.Rollback())
		is.Equal(bookings, 1) // the app's row committed with its command
		mu.Lock()
		defer mu.Unlock()
		is.Equal(keys, map[string]int{"4.acme.booking-42/deposit": 1}) // one charge, under the command's key
	})
}
