package sqlitestore_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/schema"
)

// v2Fixture is what a turnframe at schema version 2 left in a file: the
// rows of the version 1 fixture as version 2 keeps them (the duplicate key
// renamed, the claim leased), a requeued row with an attempt base, an
// executing entry under a lease, written with the column lists of version 2.
type v2Fixture struct {
	v1Fixture
}

func newV2Fixture() v2Fixture {
	f := v2Fixture{newV1Fixture()}
	f.rows = slices.Clone(f.rows)
	f.entries = slices.Clone(f.entries)
	f.rows[2].Key = "k/1~dup3"                                           // as 00002 renamed it
	f.rows[3].LeaseUntil = f.rows[3].ClaimedAt.Add(10 * time.Minute)     // a leased claim
	f.rows[1].Status, f.rows[1].AttemptBase = turnframe.OutboxPending, 5 // requeued after five attempts
	f.rows[1].FinishedAt, f.rows[1].DueAt = time.Time{}, t0.Add(2*time.Minute)
	f.entries[3].LeaseUntil = t0.Add(time.Hour) // x, executing under a lease
	return f
}

// write inserts the fixture with the column lists of schema version 2.
func (f v2Fixture) write(t *testing.T, db *sql.DB) {
	t.Helper()
	ctx := context.Background()
	us := func(t time.Time) int64 {
		if t.IsZero() {
			return 0
		}
		return t.UnixMicro()
	}
	id := func(v interface {
		IsZero() bool
		String() string
	}) string {
		if v.IsZero() {
			return ""
		}
		return v.String()
	}
	exec := func(query string, args ...any) {
		t.Helper()
		if _, err := db.ExecContext(ctx, query, args...); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
	}
	for _, tr := range f.turns {
		exec(`INSERT INTO turns (id, account, conversation, text, phase, replay, received_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			tr.ID.String(), string(tr.Account), tr.Conversation.String(), tr.Text, tr.Phase.String(), `{"Response":"done"}`,
			us(tr.ReceivedAt), us(tr.UpdatedAt))
	}
	for _, e := range f.entries {
		evIDs := []string{}
		for _, ev := range e.EventIDs {
			evIDs = append(evIDs, ev.String())
		}
		b, err := json.Marshal(evIDs)
		if err != nil {
			t.Fatal(err)
		}
		exec(`INSERT INTO journal (account, key, turn, case_key, name, payload, status, attempt, attempts, event_ids,
			code, remote_ref, admitted_at, updated_at, lease_until) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			string(e.Account), string(e.Key), e.Turn.String(), string(e.Case), e.Name, e.Payload, e.Status.String(),
			id(e.Attempt), e.Attempts, string(b), e.Code, e.RemoteRef, us(e.AdmittedAt), us(e.UpdatedAt), us(e.LeaseUntil))
	}
	ev := f.event
	exec(`INSERT INTO events (id, account, case_key, revision, turn, key, type, data, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		ev.ID.String(), string(ev.Account), string(ev.Case), int64(ev.Revision), ev.Turn.String(), string(ev.Key),
		ev.Type, ev.Data, us(ev.At))
	for i, r := range f.rows {
		held := 0
		if f.held[i] {
			held = 1
		}
		exec(`INSERT INTO outbox (seq, id, account, turn, key, destination, payload, order_key, status, attempts, due_at,
			claimed_by, claimed_at, last_code, remote_ref, created_at, updated_at, finished_at, held, lease_until, attempt_base)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			// seq leaves gaps, as deleted (pruned) rows do: they must be kept
			3*i+1, r.ID.String(), string(r.Account), r.Turn.String(), string(r.Key), r.Destination, r.Payload, r.OrderKey,
			r.Status.String(), r.Attempts, us(r.DueAt), r.ClaimedBy, us(r.ClaimedAt), r.LastCode, r.RemoteRef,
			us(r.CreatedAt), us(r.UpdatedAt), us(r.FinishedAt), held, us(r.LeaseUntil), r.AttemptBase)
	}
}

// tableInfo returns every column of table as pragma table_xinfo describes
// it (position, name, type, not null, default, primary key), one string a
// column.
func tableInfo(t *testing.T, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, table string) []string {
	t.Helper()
	rows, err := q.QueryContext(context.Background(), `SELECT cid, name, type, "notnull", coalesce(dflt_value, 'NULL'), pk, hidden FROM pragma_table_xinfo(?)`, table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var cid, notNull, pk, hidden int
		var name, typ, dflt string
		if err := rows.Scan(&cid, &name, &typ, &notNull, &dflt, &pk, &hidden); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%d %s %s notnull=%d default=%s pk=%d hidden=%d", cid, name, typ, notNull, dflt, pk, hidden))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// queryStrings returns the first column of every row of query, as text.
func queryStrings(t *testing.T, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, query string, args ...any) []string {
	t.Helper()
	rows, err := q.QueryContext(context.Background(), query, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v sql.NullString
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v.String)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// A file a turnframe at schema version 2 wrote opens: migration 00003
// rebuilds journal and outbox with the status needs_intervention, keeps
// every row, column, seq, held mark and index, adds the history table, and
// the file passes SQLite's integrity and foreign key checks; old statuses
// read back, and the new one is written and holds its order key.
func TestOpenMigratesAVersion2File(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v2.db")
	f := newV2Fixture()
	db := createAtVersion(t, path, 2)
	f.write(t, db)
	columns := map[string][]string{"journal": tableInfo(t, db, "journal"), "outbox": tableInfo(t, db, "outbox")}
	seqs := queryStrings(t, db, `SELECT seq || ' ' || id || ' held=' || held FROM outbox ORDER BY seq`)
	journalSeqs := queryStrings(t, db, `SELECT seq || ' ' || key FROM journal ORDER BY seq`)
	indexes := queryStrings(t, db, `SELECT tbl_name || '.' || name FROM sqlite_schema WHERE type = 'index' AND tbl_name IN ('journal', 'outbox') ORDER BY 1`)
	is.New(t).NoErr(db.Close())

	s := mustOpenPath(t, path)
	read := s.ReadDB()

	t.Run("SchemaIsCurrent", func(t *testing.T) { isCurrent(t, read) })
	t.Run("EveryRowReadsBack", func(t *testing.T) {
		is := is.New(t)
		all, err := s.ListOutbox(ctx, turnframe.OutboxFilter{Limit: 100})
		is.NoErr(err)
		is.Equal(all, f.rows) // every outbox row, in enqueue order, as it was
		for _, e := range f.entries {
			got, err := s.ByKey(ctx, e.Account, e.Key)
			is.NoErr(err)
			is.Equal(got, e) // every journal entry, in every old status, as it was
		}
		for _, tr := range f.turns {
			got, err := s.LoadTurn(ctx, tr.Account, tr.ID)
			is.NoErr(err)
			is.Equal(got, tr)
			replay, err := s.Replay(ctx, tr.Account, tr.ID)
			is.NoErr(err)
			is.Equal(replay.Response, "done")
		}
		evs, err := s.EventsByID(ctx, "acme", []turnframe.EventID{f.event.ID})
		is.NoErr(err)
		is.Equal(evs, []turnframe.StoredEvent{f.event})
	})
	t.Run("SeqsHeldMarksAndColumnsAreKept", func(t *testing.T) {
		is := is.New(t)
		is.Equal(queryStrings(t, read, `SELECT seq || ' ' || id || ' held=' || held FROM outbox ORDER BY seq`), seqs) // seq gaps and held marks
		is.Equal(queryStrings(t, read, `SELECT seq || ' ' || key FROM journal ORDER BY seq`), journalSeqs)            // admission order
		for table, before := range columns {
			got := tableInfo(t, read, table)
			is.True(len(got) >= len(before))
			is.Equal(got[:len(before)], before) // every column in its place, with its type, default and constraints (00004 appends one to journal)
		}
		var strict int
		is.NoErr(read.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_list WHERE strict AND name IN ('journal', 'outbox', 'history')`).Scan(&strict))
		is.Equal(strict, 3) // still STRICT, and history too
		leftAside := queryStrings(t, read, `SELECT name FROM sqlite_schema WHERE name LIKE '%\_new' ESCAPE '\'`)
		is.Equal(len(leftAside), 0) // nothing left aside
	})
	t.Run("EveryIndexIsThere", func(t *testing.T) {
		is := is.New(t)
		got := queryStrings(t, read, `SELECT tbl_name || '.' || name FROM sqlite_schema WHERE type = 'index' AND tbl_name IN ('journal', 'outbox') ORDER BY 1`)
		want := append(slices.Clone(indexes), "journal.journal_awaiting") // 00004's
		want = append(want, uncertainIndexes...)                          // 00007's
		slices.Sort(want)
		is.Equal(got, want) // the same indexes, the UNIQUE constraints' included, under the same names
		for _, name := range []string{"journal_unknown", "outbox_ordered"} {
			var def string
			is.NoErr(read.QueryRowContext(ctx, `SELECT sql FROM sqlite_schema WHERE name = ?`, name).Scan(&def))
			is.True(strings.Contains(def, "'needs_intervention'")) // the partial index covers the new status
		}
		is.Equal(queryStrings(t, read, `SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'history'`), []string{"history_subject"})
	})
	t.Run("IntegrityAndForeignKeysHold", func(t *testing.T) { isIntact(t, read) })

	// The store works on the migrated file (these subtests run in order).
	later := t0.Add(2 * time.Hour)
	unknown, dispatching, behind := f.rows[5], f.rows[3], f.rows[4]
	t.Run("AnOutboxRowNeedsIntervention", func(t *testing.T) {
		is := is.New(t)
		is.NoErr(s.Resolve(ctx, turnframe.Resolution{ID: unknown.ID, Verdict: turnframe.VerdictEscalate, Code: "policy.unsure",
			Actor: turnframe.ActorPolicy, Note: "no lookup", Now: later}))
		got, err := s.GetOutbox(ctx, unknown.ID)
		is.NoErr(err)
		is.Equal(got.Status, turnframe.OutboxNeedsIntervention) // the new status is stored and read back
		is.Equal(got.RemoteRef, unknown.RemoteRef)              // what the remote said is kept
		listed, err := s.ListOutbox(ctx, turnframe.OutboxFilter{Status: turnframe.OutboxNeedsIntervention, Limit: 10})
		is.NoErr(err)
		is.Equal(len(listed), 1)
		history, err := s.History(ctx, turnframe.OutboxSubject("acme", unknown.ID), 0, 10)
		is.NoErr(err)
		is.Equal(len(history), 1) // a migrated row has no history before the migration; its escalation is its first record
		is.Equal(history[0].From, "outcome_unknown")
		is.Equal(history[0].To, "needs_intervention")
		is.Equal(history[0].Note, "no lookup")
	})
	t.Run("AJournalEntryNeedsIntervention", func(t *testing.T) {
		is := is.New(t)
		u := f.entries[5]
		applied, err := s.Apply(ctx, turnframe.Write{Account: "acme", Turn: u.Turn, Now: later, Actor: turnframe.ActorPolicy,
			Settle: []turnframe.Settlement{{Key: u.Key, To: turnframe.JournalNeedsIntervention, Code: "policy.unsure"}}})
		is.NoErr(err)
		is.Equal(applied.Settled[0].Status, turnframe.JournalNeedsIntervention)
		got, err := s.ByKey(ctx, "acme", u.Key)
		is.NoErr(err)
		is.Equal(got, applied.Settled[0]) // stored and read back
		turns, err := s.ListUnfinishedTurns(ctx, turnframe.RecoveryScope{Account: "acme"}, 10)
		is.NoErr(err)
		var listed bool
		for _, m := range turns {
			listed = listed || m.Turn == u.Turn
		}
		is.True(listed) // its delivered turn is unfinished (journal_unknown covers the status)
	})
	t.Run("ANeedsInterventionRowHoldsItsOrderKey", func(t *testing.T) {
		is := is.New(t)
		// The dispatching row of order key "card" expires and is escalated;
		// the row behind it stays held until a person settles it.
		ids, err := s.ExpireClaims(ctx, dispatching.LeaseUntil)
		is.NoErr(err)
		is.Equal(ids, []turnframe.OutboxID{dispatching.ID})
		is.NoErr(s.Resolve(ctx, turnframe.Resolution{ID: dispatching.ID, Verdict: turnframe.VerdictEscalate, Actor: turnframe.ActorPolicy, Now: later}))
		claims, err := s.ClaimDue(ctx, later, 16, "w2", lease)
		is.NoErr(err)
		for _, c := range claims {
			is.True(c.ID != behind.ID) // held behind a row that needs intervention
		}
		is.NoErr(s.Resolve(ctx, turnframe.Resolution{ID: dispatching.ID, Verdict: turnframe.VerdictCompleted, RemoteRef: "ch_1",
			Actor: turnframe.ActorOperator, Note: "found it", Now: later}))
		claims, err = s.ClaimDue(ctx, later, 16, "w2", lease)
		is.NoErr(err)
		is.Equal(len(claims), 1)
		is.Equal(claims[0].ID, behind.ID) // let go once settled
	})
	t.Run("IntegrityHoldsAfterTheWrites", func(t *testing.T) { isIntact(t, read) })
}

// A row whose turn is missing (a file written with foreign keys off) fails
// the migration, which leaves the file as it was, at version 2.
func TestMigration3RollsBackOnARowWithoutItsTurn(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "orphan.db")
	f := newV2Fixture()
	db := createAtVersion(t, path, 2)
	f.write(t, db)
	conn, err := db.Conn(ctx)
	is.NoErr(err)
	_, err = conn.ExecContext(ctx, `PRAGMA foreign_keys = OFF`)
	is.NoErr(err)
	_, err = conn.ExecContext(ctx, `UPDATE outbox SET turn = ? WHERE seq = 1`, ids.TurnID(t0).String())
	is.NoErr(err)
	_, err = conn.ExecContext(ctx, `PRAGMA foreign_keys = ON`)
	is.NoErr(err)
	is.NoErr(conn.Close())
	before := tableInfo(t, db, "outbox")

	err = schema.Up(ctx, db)
	is.True(err != nil) // the orphan row fails the copy
	t.Log(err)
	v, err := schema.FileVersion(ctx, db)
	is.NoErr(err)
	is.Equal(v, int64(2))                        // still the old version
	is.Equal(tableInfo(t, db, "outbox"), before) // and the old table
	is.Equal(queryStrings(t, db, `SELECT count(*) FROM outbox`), []string{fmt.Sprint(len(f.rows))})
	is.Equal(len(queryStrings(t, db, `SELECT name FROM sqlite_schema WHERE name IN ('history', 'journal_new', 'outbox_new')`)), 0)
}
