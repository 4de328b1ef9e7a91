package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
	"github.com/turnframe/turnframe/pgstore/pgtest"
)

// DestinationCounts takes "the first n destinations, in name order": the
// order of their bytes, as sqlitestore's (the CLI's status shows either
// store's the same way). It sorted by the column's collation, which is the
// database's default: on an en_US or ICU database "a" came before "B",
// which SQLite and a C database put after it.
func TestDestinationCountsSortsByBytesWhateverTheCollation(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s := mustOpenURL(t, pgtest.Schema(t))
	// A database created with a linguistic default collation gives its text
	// columns that collation; here the column is given one.
	_, err := s.Pool().Exec(ctx, `ALTER TABLE outbox ALTER COLUMN destination TYPE text COLLATE "und-x-icu"`)
	is.NoErr(err)
	ids := turnframe.NewIDGenerator()
	now := time.Now()
	is.NoErr(enqueueRows(ctx, s, ids, "acme", "k1", now,
		turnframe.OutboxMessage{Destination: "a"}, turnframe.OutboxMessage{Destination: "B"}))
	dests, err := s.DestinationCounts(ctx, 1)
	is.NoErr(err)
	is.Equal(dests, []pgstore.DestinationCount{{Destination: "B", Status: turnframe.OutboxPending, Rows: 1}}) // "B" (0x42) before "a" (0x61)
	dests, err = s.DestinationCounts(ctx, 2)
	is.NoErr(err)
	is.Equal(len(dests), 2)
	is.Equal(dests[0].Destination, "B") // sorted by bytes too
}
