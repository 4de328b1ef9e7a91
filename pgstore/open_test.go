package pgstore_test

import (
	"context"
	"crypto/rand"
	"errors"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
	"github.com/turnframe/turnframe/pgstore/pgtest"
)

func TestOpen(t *testing.T) {
	t.Run("AnEmptyURLIsInvalid", func(t *testing.T) {
		is := is.New(t)
		_, err := pgstore.Open(context.Background(), "")
		is.True(errors.Is(err, turnframe.ErrInvalid)) // invalid
	})
	t.Run("ANilPoolIsInvalid", func(t *testing.T) {
		is := is.New(t)
		_, err := pgstore.New(context.Background(), nil)
		is.True(errors.Is(err, turnframe.ErrInvalid)) // invalid
	})
	t.Run("ASearchPathWithNoExistingSchemaIsInvalidAndCreatesNothing", func(t *testing.T) {
		is := is.New(t)
		missing := "t_missing_" + strings.ToLower(rand.Text())
		_, err := pgstore.Open(context.Background(), pgtest.WithParams(t, pgtest.ServerURL(t), url.Values{"search_path": {missing}}))
		is.True(errors.Is(err, turnframe.ErrInvalid))             // invalid, not goose's "relation does not exist"
		is.True(strings.Contains(err.Error(), "create it first")) // says what to do
		is.True(strings.Contains(err.Error(), missing))           // names the search_path
	})
	t.Run("ManyOpenersAtOnceApplyTheSchemaOnce", func(t *testing.T) {
		is := is.New(t)
		url := pgtest.Schema(t)
		const n = 4
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				s, err := pgstore.Open(context.Background(), url)
				if err == nil {
					err = s.Close()
				}
				errs[i] = err
			})
		}
		wg.Wait()
		for _, err := range errs {
			is.NoErr(err) // every opener succeeds
		}
		s := mustOpenURL(t, url)
		var versions int
		is.NoErr(s.Pool().QueryRow(context.Background(),
			`SELECT count(*) FROM `+pgstore.VersionTable+` WHERE version_id > 0`).Scan(&versions))
		is.Equal(versions, int(pgstore.SchemaVersion)) // each migration recorded once
	})
	t.Run("ACancelledContextIsTheContextsError", func(t *testing.T) {
		is := is.New(t)
		s := mustOpen(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := s.ClaimDue(ctx, base, 1, "w", 1e9)
		is.True(errors.Is(err, context.Canceled)) // the context's error
	})
	t.Run("ATextPostgreSQLCannotKeepIsInvalid", func(t *testing.T) {
		is := is.New(t)
		s := mustOpen(t)
		ids := turnframe.NewIDGenerator()
		turn := ids.TurnID(base)
		_, err := s.Apply(context.Background(), turnframe.Write{Account: "acme", Turn: turn, Now: base,
			Begin: &turnframe.StoredTurn{Account: "acme", ID: turn, Conversation: ids.ConversationID(base), Text: "a\x00b"}})
		is.True(errors.Is(err, turnframe.ErrInvalid)) // a NUL byte: PostgreSQL's text cannot hold it
	})
}

// mustOpenURL opens a store on url, closed when t ends.
func mustOpenURL(t testing.TB, url string, opts ...pgstore.Option) *pgstore.Store {
	t.Helper()
	s, err := pgstore.Open(context.Background(), url, opts...)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
