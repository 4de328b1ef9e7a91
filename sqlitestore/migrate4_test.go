package sqlitestore_test

import (
	"context"
	"database/sql"
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

// v3Fixture is what a turnframe at schema version 3 left in a file: the
// version 2 fixture, its unknown entry escalated to needs_intervention, and
// an audit trail.
type v3Fixture struct {
	v2Fixture
	history []turnframe.HistoryRecord
}

func newV3Fixture() v3Fixture {
	f := v3Fixture{v2Fixture: newV2Fixture()}
	f.entries = slices.Clone(f.entries)
	f.entries[5].Status, f.entries[5].Code = turnframe.JournalNeedsIntervention, "policy.no_lookup" // u, escalated
	f.history = []turnframe.HistoryRecord{
		{Subject: turnframe.OutboxSubject("acme", f.rows[5].ID), To: "outcome_unknown", Attempt: "1", Actor: "worker:w", RemoteRef: "ref-u", At: t0.Add(time.Minute)},
		{Subject: turnframe.JournalSubject("acme", "u"), From: "outcome_unknown", To: "needs_intervention", Actor: turnframe.ActorPolicy,
			Code: "policy.no_lookup", Note: "the remote cannot be asked", At: t0.Add(time.Hour)},
	}
	return f
}

// write inserts the fixture with the column lists of schema version 3.
func (f v3Fixture) write(t *testing.T, db *sql.DB) {
	t.Helper()
	f.v2Fixture.write(t, db)
	for _, h := range f.history {
		_, err := db.ExecContext(context.Background(), `INSERT INTO history (kind, account, ref, from_status, to_status, evidence,
			attempt, actor, code, remote_ref, note, at) VALUES (?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?)`,
			h.Kind.String(), string(h.Account), h.Ref, h.From, h.To, h.Attempt, string(h.Actor), h.Code, h.RemoteRef, h.Note, h.At.UnixMicro())
		if err != nil {
			t.Fatalf("insert history: %v", err)
		}
	}
}

// outboxSQL reads how outbox's indexes and history are defined: untouched
// by 00004 and 00005. (00006 adds a column to outbox's own definition: see
// migrate6_test.go; 00007 adds indexes, left out: see uncertainIndexes.)
const outboxSQL = `SELECT sql FROM sqlite_schema WHERE tbl_name IN ('outbox', 'history') AND name <> 'outbox' AND ` + notUncertainIndex + ` ORDER BY name`

// A file a turnframe at schema version 3 wrote opens: migration 00004
// rebuilds journal with the status awaiting_approval and the column
// needs_approval, keeps every row, seq, column, index and the history
// table, and the file passes SQLite's integrity and foreign key checks;
// the new status is written, read back and listed.
func TestOpenMigratesAVersion3File(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v3.db")
	f := newV3Fixture()
	db := createAtVersion(t, path, 3)
	f.write(t, db)
	columns := tableInfo(t, db, "journal")
	journalSeqs := queryStrings(t, db, `SELECT seq || ' ' || key || ' ' || status FROM journal ORDER BY seq`)
	indexes := queryStrings(t, db, `SELECT tbl_name || '.' || name FROM sqlite_schema WHERE type = 'index' ORDER BY 1`)
	outbox := queryStrings(t, db, outboxSQL)
	history := queryStrings(t, db, `SELECT seq || ' ' || kind || ' ' || ref || ' ' || to_status || ' ' || note FROM history ORDER BY seq`)
	is.New(t).NoErr(db.Close())

	s := mustOpenPath(t, path)
	read := s.ReadDB()

	t.Run("SchemaIsCurrent", func(t *testing.T) { isCurrent(t, read) })
	t.Run("EveryRowReadsBack", func(t *testing.T) {
		is := is.New(t)
		for _, e := range f.entries {
			got, err := s.ByKey(ctx, e.Account, e.Key)
			is.NoErr(err)
			is.Equal(got, e) // every entry as it was, needs_intervention included; none needs approval
		}
		all, err := s.ListOutbox(ctx, turnframe.OutboxFilter{Limit: 100})
		is.NoErr(err)
		is.Equal(all, f.rows) // the outbox is not touched
		for _, h := range f.history {
			got, err := s.History(ctx, h.Subject, 0, 10)
			is.NoErr(err)
			is.Equal(len(got), 1)
			got[0].Seq = 0
			is.Equal(got[0], h) // the audit trail is kept
		}
	})
	t.Run("SeqsColumnsAndTablesAreKept", func(t *testing.T) {
		is := is.New(t)
		is.Equal(queryStrings(t, read, `SELECT seq || ' ' || key || ' ' || status FROM journal ORDER BY seq`), journalSeqs) // admission order
		after := tableInfo(t, read, "journal")
		is.Equal(after[:len(columns)], columns) // every column in its place, with its type, default and constraints
		is.Equal(after[len(columns):], []string{fmt.Sprintf("%d needs_approval INTEGER notnull=1 default=0 pk=0 hidden=0", len(columns))})
		is.Equal(queryStrings(t, read, outboxSQL), outbox) // outbox and history untouched
		is.Equal(queryStrings(t, read, `SELECT seq || ' ' || kind || ' ' || ref || ' ' || to_status || ' ' || note FROM history ORDER BY seq`), history)
		var strict int
		is.NoErr(read.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_list WHERE strict AND name = 'journal'`).Scan(&strict))
		is.Equal(strict, 1) // still STRICT
		is.Equal(len(queryStrings(t, read, `SELECT name FROM sqlite_schema WHERE name LIKE '%\_new' ESCAPE '\'`)), 0)
	})
	t.Run("EveryIndexIsThereAndOneMore", func(t *testing.T) {
		is := is.New(t)
		want := append(slices.Clone(indexes), "journal.journal_awaiting", "turns.turns_message") // 00005's too
		want = append(want, uncertainIndexes...)                                                 // and 00007's
		slices.Sort(want)
		is.Equal(queryStrings(t, read, `SELECT tbl_name || '.' || name FROM sqlite_schema WHERE type = 'index' ORDER BY 1`), want)
		var def string
		is.NoErr(read.QueryRowContext(ctx, `SELECT sql FROM sqlite_schema WHERE name = 'journal_unknown'`).Scan(&def))
		is.True(strings.Contains(def, "'needs_intervention'")) // the partial indexes as 00003 made them
	})
	t.Run("IntegrityAndForeignKeysHold", func(t *testing.T) { isIntact(t, read) })
	executing := f.turns[1].ID
	t.Run("TheNewStatusIsWrittenAndReadBack", func(t *testing.T) {
		is := is.New(t)
		cmd := turnframe.Command{Key: "pay", Case: "card/1", Name: "pay", NeedsApproval: true}
		a, err := s.Apply(ctx, turnframe.Write{Account: "acme", Turn: executing, Now: t0.Add(2 * time.Hour), Admit: []turnframe.Command{cmd}})
		is.NoErr(err)
		is.Equal(a.Admitted[0].Status, turnframe.JournalAwaitingApproval)
		got, err := s.ByKey(ctx, "acme", "pay")
		is.NoErr(err)
		is.Equal(got, a.Admitted[0]) // stored and read back, needs_approval included
		is.Equal(queryStrings(t, read, `SELECT status || ' ' || needs_approval FROM journal WHERE key = 'pay'`), []string{"awaiting_approval 1"})
	})
	t.Run("DownIsRefusedWhileAnEntryAwaitsApproval", func(t *testing.T) {
		is := is.New(t)
		is.NoErr(s.Close())
		db, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)")
		is.NoErr(err)
		defer db.Close()
		is.True(downTo(t, db, 3) != nil) // the awaiting entry fails the copy
		v, err := schema.FileVersion(ctx, db)
		is.NoErr(err)
		is.Equal(v, int64(4)) // left as it was
		is.Equal(queryStrings(t, db, `SELECT count(*) FROM journal`), []string{fmt.Sprint(len(f.entries) + 1)})
		_, err = db.ExecContext(ctx, `UPDATE journal SET status = 'rejected' WHERE key = 'pay'`)
		is.NoErr(err)
		is.NoErr(downTo(t, db, 3)) // with nothing awaiting, it goes down
		is.Equal(tableInfo(t, db, "journal"), columns)
		is.Equal(queryStrings(t, db, `SELECT count(*) FROM journal`), []string{fmt.Sprint(len(f.entries) + 1)}) // every row kept
	})
}
