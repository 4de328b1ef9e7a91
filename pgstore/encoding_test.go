package pgstore_test

import (
	"context"
	"crypto/rand"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
	"github.com/turnframe/turnframe/pgstore/pgtest"
)

// databaseIn creates a database of the given encoding on the test server,
// dropped when t ends, and returns its URL.
func databaseIn(t *testing.T, encoding string) string {
	t.Helper()
	ctx := context.Background()
	base := pgtest.ServerURL(t)
	db := "enc_" + strings.ToLower(rand.Text())
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) })
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+db+" ENCODING '"+encoding+"' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0"); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() { // after the stores on it closed
		if _, err := admin.Exec(context.Background(), "DROP DATABASE "+db+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", db, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("url: %v", err)
	}
	u.Path = "/" + db
	return u.String()
}

// pgx sends and reads text as UTF-8 and sets no client_encoding, so a
// session on a database in another encoding reads in that encoding. On a
// LATIN1 database the store's write transactions (which set client_encoding
// to UTF8, settings.go) converted a message id "café" to LATIN1, and every
// read outside them returned it unconverted, "caf\xe9": the id read back
// was not the id received, and a text holding "€" or an emoji, which
// LATIN1 lacks, could not be received at all. New refuses such a database,
// by its encoding, before creating anything; SQL_ASCII, which keeps bytes
// as they come, serves, and so does UTF8.
func TestADatabaseThatConvertsTextIsRefusedByItsEncoding(t *testing.T) {
	ctx := context.Background()
	t.Run("LATIN1", func(t *testing.T) {
		is := is.New(t)
		u := databaseIn(t, "LATIN1")
		_, err := pgstore.Open(ctx, u)
		is.True(errors.Is(err, turnframe.ErrInvalid))    // refused, not something to wait out
		is.True(strings.Contains(err.Error(), "LATIN1")) // naming the database's encoding
		is.True(strings.Contains(err.Error(), "UTF8"))   // and the one needed
		conn, err := pgx.Connect(ctx, u)
		is.NoErr(err)
		defer conn.Close(ctx)
		var tables int
		is.NoErr(conn.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = 'public'`).Scan(&tables))
		is.Equal(tables, 0) // nothing created
	})
	t.Run("SQL_ASCII", func(t *testing.T) {
		is := is.New(t)
		s := mustOpenURL(t, databaseIn(t, "SQL_ASCII"))
		ids := turnframe.NewIDGenerator()
		for _, id := range []turnframe.MessageID{"caf\u00e9", "\u20ac 1", "\U0001F600"} {
			turn := ids.TurnID(base)
			_, err := s.Apply(ctx, turnframe.Write{Account: "acme", Turn: turn, Now: base,
				Begin: &turnframe.StoredTurn{Account: "acme", ID: turn, Conversation: ids.ConversationID(base), Text: string(id), MessageID: id}})
			is.NoErr(err) // received
			got, err := s.LoadTurn(ctx, "acme", turn)
			is.NoErr(err)
			is.Equal(got.MessageID, id)    // read back as it came
			is.Equal(got.Text, string(id)) // text too
		}
	})
}
