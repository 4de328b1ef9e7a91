package sqlitestore_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// v4Fixture is what a turnframe at schema version 4 left in a file: the
// version 3 fixture, one of its entries awaiting approval.
type v4Fixture struct {
	v3Fixture
}

func newV4Fixture() v4Fixture {
	f := v4Fixture{newV3Fixture()}
	f.entries = slices.Clone(f.entries)
	f.entries[0].Status, f.entries[0].NeedsApproval = turnframe.JournalAwaitingApproval, true
	return f
}

// write inserts the fixture with the column lists of schema version 4.
func (f v4Fixture) write(t *testing.T, db *sql.DB) {
	t.Helper()
	f.v3Fixture.write(t, db)
	e := f.entries[0]
	_, err := db.ExecContext(context.Background(), `UPDATE journal SET status = 'awaiting_approval', needs_approval = 1
		WHERE account = ? AND key = ?`, string(e.Account), string(e.Key))
	if err != nil {
		t.Fatalf("await approval: %v", err)
	}
}

// othersSQL reads how the tables 00005 leaves alone are defined, but for
// outbox's own definition, to which 00006 adds a column (migrate6_test.go),
// and the indexes 00007 adds (uncertainIndexes).
const othersSQL = `SELECT sql FROM sqlite_schema WHERE tbl_name IN ('journal', 'outbox', 'history', 'events') AND name <> 'outbox' AND ` + notUncertainIndex + ` ORDER BY name`

// A file a turnframe at schema version 4 wrote opens: migration 00005 adds
// the column message_id to turns (NULL for every turn it holds) and the
// index turns_message, keeps every row, column and index, and the file
// passes SQLite's integrity and foreign key checks; a message id is then
// kept and finds its redelivery. Down takes the column away and keeps
// every turn.
func TestOpenMigratesAVersion4File(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v4.db")
	f := newV4Fixture()
	db := createAtVersion(t, path, 4)
	f.write(t, db)
	columns := tableInfo(t, db, "turns")
	turns := queryStrings(t, db, `SELECT id || ' ' || account || ' ' || phase || ' ' || text FROM turns ORDER BY rowid`)
	indexes := queryStrings(t, db, `SELECT tbl_name || '.' || name FROM sqlite_schema WHERE type = 'index' ORDER BY 1`)
	others := queryStrings(t, db, othersSQL)
	is.New(t).NoErr(db.Close())

	s := mustOpenPath(t, path)
	read := s.ReadDB()

	t.Run("SchemaIsCurrent", func(t *testing.T) { isCurrent(t, read) })
	t.Run("EveryRowReadsBack", func(t *testing.T) {
		is := is.New(t)
		for _, want := range f.turns {
			got, err := s.LoadTurn(ctx, want.Account, want.ID)
			is.NoErr(err)
			is.Equal(got, want) // every turn as it was, without a message id
		}
		for _, e := range f.entries {
			got, err := s.ByKey(ctx, e.Account, e.Key)
			is.NoErr(err)
			is.Equal(got, e) // every entry, the one awaiting approval included
		}
		all, err := s.ListOutbox(ctx, turnframe.OutboxFilter{Limit: 100})
		is.NoErr(err)
		is.Equal(all, f.rows) // the outbox is not touched
	})
	t.Run("ColumnsTablesAndIndexesAreKept", func(t *testing.T) {
		is := is.New(t)
		after := tableInfo(t, read, "turns")
		is.Equal(after[:len(columns)], columns) // every column in its place
		is.Equal(after[len(columns):], []string{fmt.Sprintf("%d message_id TEXT notnull=0 default=NULL pk=0 hidden=0", len(columns))})
		is.Equal(queryStrings(t, read, `SELECT id || ' ' || account || ' ' || phase || ' ' || text FROM turns ORDER BY rowid`), turns)
		is.Equal(queryStrings(t, read, `SELECT count(*) FROM turns WHERE message_id IS NOT NULL`), []string{"0"})
		is.Equal(queryStrings(t, read, othersSQL), others)
		want := append(slices.Clone(indexes), "turns.turns_message")
		want = append(want, uncertainIndexes...) // 00007's
		slices.Sort(want)
		is.Equal(queryStrings(t, read, `SELECT tbl_name || '.' || name FROM sqlite_schema WHERE type = 'index' ORDER BY 1`), want)
		var strict int
		is.NoErr(read.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_list WHERE strict AND name = 'turns'`).Scan(&strict))
		is.Equal(strict, 1) // still STRICT
		isIntact(t, read)
	})
	t.Run("AMessageIDIsKeptAndFindsItsRedelivery", func(t *testing.T) {
		is := is.New(t)
		old := f.turns[0]
		begin := func(turn turnframe.TurnID) turnframe.Write {
			return turnframe.Write{Account: old.Account, Turn: turn, Now: t0.Add(3 * time.Hour), Begin: &turnframe.StoredTurn{
				Account: old.Account, ID: turn, Conversation: old.Conversation, Text: old.Text, MessageID: "upd-1"}}
		}
		first := begin(ids.TurnID(t0.Add(3 * time.Hour)))
		a, err := s.Apply(ctx, first)
		is.NoErr(err)
		is.Equal(a.Redelivered, nil) // no turn of the old file had an id
		a, err = s.Apply(ctx, begin(ids.TurnID(t0.Add(3*time.Hour))))
		is.NoErr(err)
		is.True(a.Redelivered != nil)          // the redelivery is found
		is.Equal(a.Redelivered.ID, first.Turn) // the turn it began
	})
	t.Run("DownDropsTheColumnAndKeepsEveryTurn", func(t *testing.T) {
		is := is.New(t)
		is.NoErr(s.Close())
		db, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)")
		is.NoErr(err)
		defer db.Close()
		is.NoErr(downTo(t, db, 4))
		is.Equal(tableInfo(t, db, "turns"), columns)                                                      // as version 4 had it
		is.Equal(queryStrings(t, db, `SELECT count(*) FROM turns`), []string{fmt.Sprint(len(turns) + 1)}) // every turn kept
		is.Equal(queryStrings(t, db, `PRAGMA integrity_check`), []string{"ok"})
	})
}
