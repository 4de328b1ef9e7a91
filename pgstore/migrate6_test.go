package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
	"github.com/turnframe/turnframe/pgstore/pgtest"
)

// TestOpenMigratesAVersion5Schema opens a schema an earlier build left at
// version 5, holding a turn and a Pending outbox row, and checks that Open
// takes it to SchemaVersion keeping both: the row reads back whole, with
// an empty trace context, and is claimed as before.
func TestOpenMigratesAVersion5Schema(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	url := pgtest.Schema(t)
	pool, err := pgxpool.New(ctx, url)
	is.NoErr(err) // pool
	defer pool.Close()
	is.NoErr(pgstore.MigrateTo(ctx, pool, 5)) // the schema an earlier build wrote

	gen := turnframe.NewIDGenerator()
	at := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	turn, row := gen.TurnID(at), gen.OutboxID(at)
	_, err = pool.Exec(ctx, `INSERT INTO turns (id, account, conversation, text, phase, received_at, updated_at)
		VALUES ($1, 'acme', $2, 'hello', 'committed', $3, $3)`, turn.String(), gen.ConversationID(at).String(), at.UnixMicro())
	is.NoErr(err) // a version-5 turn
	_, err = pool.Exec(ctx, `INSERT INTO outbox (id, account, turn, key, destination, payload, order_key, status,
		attempts, due_at, claimed_by, claimed_at, last_code, remote_ref, created_at, updated_at, finished_at)
		VALUES ($1, 'acme', $2, 'k1', 'payments', '\x7b7d', '', 'pending', 0, $3, '', 0, '', '', $3, $3, 0)`,
		row.String(), turn.String(), at.UnixMicro())
	is.NoErr(err) // a version-5 row

	s, err := pgstore.Open(ctx, url, pgstore.WithClock(pgstore.CallerClock))
	is.NoErr(err) // Open migrates
	defer s.Close()
	var v int64
	is.NoErr(s.Pool().QueryRow(ctx, `SELECT max(version_id) FROM `+pgstore.VersionTable).Scan(&v))
	is.Equal(v, pgstore.SchemaVersion) // at this build's version

	got, err := s.GetOutbox(ctx, row)
	is.NoErr(err)                                 // the row is kept
	is.Equal(got.Turn, turn)                      // its turn
	is.Equal(string(got.Key), "k1")               // its key
	is.Equal(string(got.Payload), "{}")           // its payload
	is.Equal(got.Status, turnframe.OutboxPending) // its status
	is.Equal(got.TraceContext, "")                // no trace context
	is.True(got.CreatedAt.Equal(at))              // its times

	claims, err := s.ClaimDue(ctx, at.Add(time.Minute), 10, "w1", time.Minute)
	is.NoErr(err)               // claim
	is.Equal(len(claims), 1)    // the old row is claimed
	is.Equal(claims[0].ID, row) // that row
}
