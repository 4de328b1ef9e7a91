package pgstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
	"github.com/turnframe/turnframe/pgstore/pgtest"
)

// TestOpenMigratesAVersion6Schema opens a schema an earlier build left at
// version 6, holding a turn and outbox rows in three statuses, and checks
// that Open takes it to SchemaVersion keeping every row: each reads back
// whole, the indexes outbox_unknown and outbox_intervention are there,
// each holding the rows of its status in seq order, and the listings by
// those statuses answer as before.
func TestOpenMigratesAVersion6Schema(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	url := pgtest.Schema(t)
	pool, err := pgxpool.New(ctx, url)
	is.NoErr(err) // pool
	defer pool.Close()
	is.NoErr(pgstore.MigrateTo(ctx, pool, 6)) // the schema an earlier build wrote

	gen := turnframe.NewIDGenerator()
	at := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	turn := gen.TurnID(at)
	_, err = pool.Exec(ctx, `INSERT INTO turns (id, account, conversation, text, phase, received_at, updated_at)
		VALUES ($1, 'acme', $2, 'hello', 'committed', $3, $3)`, turn.String(), gen.ConversationID(at).String(), at.UnixMicro())
	is.NoErr(err) // a version-6 turn
	statuses := []turnframe.OutboxStatus{turnframe.OutboxCompleted, turnframe.OutboxOutcomeUnknown,
		turnframe.OutboxNeedsIntervention, turnframe.OutboxOutcomeUnknown, turnframe.OutboxCompleted}
	ids := make([]turnframe.OutboxID, len(statuses))
	for i, st := range statuses {
		ids[i] = gen.OutboxID(at)
		var finished int64
		if st.IsFinished() {
			finished = at.UnixMicro()
		}
		_, err = pool.Exec(ctx, `INSERT INTO outbox (id, account, turn, key, destination, payload, order_key, status,
			attempts, due_at, claimed_by, claimed_at, last_code, remote_ref, created_at, updated_at, finished_at, trace_context)
			VALUES ($1, 'acme', $2, $3, 'payments', '\x7b7d', '', $4, 1, $5, 'w', $5, '', 'ref', $5, $5, $6, 'tc')`,
			ids[i].String(), turn.String(), "k"+string(rune('1'+i)), st.String(), at.UnixMicro(), finished)
		is.NoErr(err) // a version-6 row
	}

	s, err := pgstore.Open(ctx, url, pgstore.WithClock(pgstore.CallerClock))
	is.NoErr(err) // Open migrates
	defer s.Close()
	var v int64
	is.NoErr(s.Pool().QueryRow(ctx, `SELECT max(version_id) FROM `+pgstore.VersionTable).Scan(&v))
	is.Equal(v, pgstore.SchemaVersion) // at this build's version

	for i, id := range ids {
		got, err := s.GetOutbox(ctx, id)
		is.NoErr(err)                          // every row is kept
		is.Equal(got.Status, statuses[i])      // in its status
		is.Equal(string(got.Payload), "{}")    // with its payload
		is.Equal(got.TraceContext, "tc")       // and its trace context
		is.True(got.CreatedAt.Equal(at))       // and its times
		is.Equal(string(got.RemoteRef), "ref") // and its remote reference
	}

	for index, where := range map[string]string{
		"outbox_unknown":      "WHERE (status = 'outcome_unknown'::text)",
		"outbox_intervention": "WHERE (status = 'needs_intervention'::text)",
	} {
		var def string
		is.NoErr(s.Pool().QueryRow(ctx, `SELECT indexdef FROM pg_indexes
			WHERE schemaname = current_schema() AND tablename = 'outbox' AND indexname = $1`, index).Scan(&def)) // the index is there
		is.True(strings.HasSuffix(def, where))  // holding the rows of its status
		is.True(strings.Contains(def, "(seq)")) // in seq order
	}

	list := func(f turnframe.OutboxFilter) []turnframe.OutboxID {
		rows, err := s.ListOutbox(ctx, f)
		is.NoErr(err)
		var out []turnframe.OutboxID
		for _, r := range rows {
			out = append(out, r.ID)
		}
		return out
	}
	is.Equal(list(turnframe.OutboxFilter{Status: turnframe.OutboxOutcomeUnknown, Limit: 10}), []turnframe.OutboxID{ids[1], ids[3]})             // the unknown rows, oldest first
	is.Equal(list(turnframe.OutboxFilter{Status: turnframe.OutboxOutcomeUnknown, Limit: 10, After: ids[2]}), []turnframe.OutboxID{ids[3]})      // after a row of another status
	is.Equal(list(turnframe.OutboxFilter{Status: turnframe.OutboxNeedsIntervention, Account: "acme", Limit: 10}), []turnframe.OutboxID{ids[2]}) // the row needing a person
	is.Equal(list(turnframe.OutboxFilter{Status: turnframe.OutboxNeedsIntervention, Account: "globex", Limit: 10}), []turnframe.OutboxID(nil))  // of its account only
	is.Equal(list(turnframe.OutboxFilter{Limit: 10}), ids)                                                                                      // and every row, in enqueue order
}
