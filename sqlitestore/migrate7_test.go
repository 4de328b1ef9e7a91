package sqlitestore_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

// A file a turnframe at schema version 6 wrote (the version 4 fixture, its
// globex row escalated to needs_intervention) opens: migration 00007 adds
// the partial indexes outbox_unknown and outbox_intervention, holding
// exactly the rows of their status, and keeps every row, column, table and
// other index; the file passes SQLite's integrity and foreign key checks.
// The listings by those statuses read them, and answer as before. Down
// drops the two indexes and keeps every row.
func TestOpenMigratesAVersion6File(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v6.db")
	f := newV4Fixture()
	db := createAtVersion(t, path, 6)
	f.write(t, db)
	escalated := &f.rows[6] // globex's row
	escalated.Status, escalated.Attempts, escalated.LastCode = turnframe.OutboxNeedsIntervention, 1, "policy.no_lookup"
	_, err := db.ExecContext(ctx, `UPDATE outbox SET status = 'needs_intervention', attempts = 1, last_code = 'policy.no_lookup' WHERE id = ?`,
		escalated.ID.String())
	is.New(t).NoErr(err)
	const rowsSQL = `SELECT seq || ' ' || id || ' ' || status || ' ' || held || ' ' || hex(payload) FROM outbox ORDER BY seq`
	const definitionsSQL = `SELECT name || ' ' || coalesce(sql, '') FROM sqlite_schema WHERE ` + notUncertainIndex + ` ORDER BY name`
	columns := tableInfo(t, db, "outbox")
	rows := queryStrings(t, db, rowsSQL)
	definitions := queryStrings(t, db, definitionsSQL)
	is.New(t).NoErr(db.Close())

	s := mustOpenPath(t, path)
	read := s.ReadDB()

	t.Run("SchemaIsCurrent", func(t *testing.T) { isCurrent(t, read) })
	t.Run("EveryRowReadsBack", func(t *testing.T) {
		is := is.New(t)
		all, err := s.ListOutbox(ctx, turnframe.OutboxFilter{Limit: 100})
		is.NoErr(err)
		is.Equal(all, f.rows) // every row as it was
		is.Equal(queryStrings(t, read, rowsSQL), rows)
	})
	t.Run("TwoIndexesAreAddedAndEverythingElseKept", func(t *testing.T) {
		is := is.New(t)
		is.Equal(tableInfo(t, read, "outbox"), columns)              // every column as it was
		is.Equal(queryStrings(t, read, definitionsSQL), definitions) // every table and other index as it was
		is.Equal(queryStrings(t, read, `SELECT tbl_name || '.' || name FROM sqlite_schema
			WHERE name IN ('outbox_unknown', 'outbox_intervention') ORDER BY 1`), uncertainIndexes) // the two indexes, on outbox
		for index, status := range map[string]string{"outbox_unknown": "outcome_unknown", "outbox_intervention": "needs_intervention"} {
			is.Equal(queryStrings(t, read, `SELECT name FROM pragma_index_info(?)`, index), []string{"seq"}) // in seq order
			is.Equal(queryStrings(t, read, `SELECT count(*) FROM pragma_index_list('outbox') WHERE name = ? AND partial`, index), []string{"1"})
			var def string
			is.NoErr(read.QueryRowContext(ctx, `SELECT sql FROM sqlite_schema WHERE name = ?`, index).Scan(&def))
			is.True(strings.HasSuffix(def, "WHERE status = '"+status+"'")) // only the rows of its status
		}
		isIntact(t, read)
	})
	t.Run("TheListingsByStatusReadTheIndexesAndAnswerAsBefore", func(t *testing.T) {
		tests := []struct {
			name   string
			filter turnframe.OutboxFilter
			index  string
			want   []turnframe.OutboxRecord
		}{
			{"Unknown", turnframe.OutboxFilter{Status: turnframe.OutboxOutcomeUnknown, Limit: 10}, "outbox_unknown", f.rows[5:6]},
			{"UnknownAfterTheFirstRow", turnframe.OutboxFilter{Status: turnframe.OutboxOutcomeUnknown, Limit: 10, After: f.rows[0].ID}, "outbox_unknown", f.rows[5:6]},
			{"UnknownAfterItself", turnframe.OutboxFilter{Status: turnframe.OutboxOutcomeUnknown, Limit: 10, After: f.rows[5].ID}, "outbox_unknown", nil},
			{"Intervention", turnframe.OutboxFilter{Status: turnframe.OutboxNeedsIntervention, Limit: 10}, "outbox_intervention", f.rows[6:7]},
			{"InterventionOfAnotherAccount", turnframe.OutboxFilter{Status: turnframe.OutboxNeedsIntervention, Account: "acme", Limit: 10}, "outbox_intervention", nil},
			{"InterventionOfItsAccount", turnframe.OutboxFilter{Status: turnframe.OutboxNeedsIntervention, Account: "globex", Limit: 10}, "outbox_intervention", f.rows[6:7]},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				is := is.New(t)
				got, err := s.ListOutbox(ctx, tc.filter)
				is.NoErr(err)
				is.Equal(got, tc.want) // the rows of the status, as before
				query, args := sqlitestore.ListOutboxSQL(tc.filter, 1)
				plan := strings.Join(queryPlan(t, s, query, args...), "\n")
				is.True(strings.Contains(plan, tc.index)) // read through the status's index
			})
		}
	})
	t.Run("DownDropsTheIndexesAndKeepsEveryRow", func(t *testing.T) {
		is := is.New(t)
		is.NoErr(s.Close())
		db := sqlitestoreWriter(t, path)
		is.NoErr(downTo(t, db, 6))
		is.Equal(queryStrings(t, db, definitionsSQL), definitions) // as version 6 had it
		is.Equal(queryStrings(t, db, `SELECT name FROM sqlite_schema WHERE NOT `+notUncertainIndex), []string(nil))
		is.Equal(queryStrings(t, db, rowsSQL), rows) // every row kept
		is.Equal(queryStrings(t, db, `PRAGMA integrity_check`), []string{"ok"})
	})
}
