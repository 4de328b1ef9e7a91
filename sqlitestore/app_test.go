package sqlitestore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
	"github.com/turnframe/turnframe/storetest"
	"modernc.org/sqlite"
)

var _ storetest.AppStore = appStore{}

// appStore is a sqlitestore as the conformance suite's App subtests use
// it: the application's rows are a table of its own in the same file,
// written on the *sql.Tx SQLTx returns.
type appStore struct{ *sqlitestore.Store }

// appTableSQL is the application's table of the tests.
const appTableSQL = `CREATE TABLE app_rows (key TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT`

// withAppTable creates the application's table in s, which must succeed.
func withAppTable(t *testing.T, s *sqlitestore.Store) appStore {
	t.Helper()
	ctx := context.Background()
	tx, err := s.BeginTx(ctx)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, appTableSQL); err != nil {
		t.Fatalf("create the app table: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatalf("commit the app table: %v", err)
	}
	return appStore{s}
}

func (s appStore) PutAppRow(ctx context.Context, tx turnframe.Tx, key, value string) error {
	sqlTx, ok := sqlitestore.SQLTx(tx)
	if !ok {
		return fmt.Errorf("not a sqlitestore transaction: %T", tx)
	}
	_, err := sqlTx.ExecContext(ctx, `INSERT INTO app_rows (key, value) VALUES (?, ?)`, key, value)
	return err
}

// AppRows reads the table on a transaction of its own: the writer, so it
// waits for any Write in progress.
func (s appStore) AppRows(ctx context.Context) (map[string]string, error) {
	tx, err := s.BeginTx(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, `SELECT key, value FROM app_rows`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	got := make(map[string]string)
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		got[k] = v
	}
	return got, rows.Err()
}

// TestAppWritesOnTheStoresTransaction holds sqlitestore to what only it
// does with an App: the app's SQL errors are its own, not the store's, and
// under ApplyTx the App runs under the Write's savepoint.
func TestAppWritesOnTheStoresTransaction(t *testing.T) {
	tests := []struct {
		name    string
		applyTx bool // through BeginTx and ApplyTx, the caller committing
		dup     bool // the App inserts a row whose key exists
		want    map[string]string
	}{
		{"ApplyCommitsTheAppsRows", false, false, map[string]string{"held": "1", "k": "2"}},
		{"AnAppsUniqueViolationIsAnAppErrorNotAConflict", false, true, map[string]string{"held": "1"}},
		{"ApplyTxWritesTheAppsRowsInTheCallersTransaction", true, false, map[string]string{"held": "1", "k": "2", "caller": "3"}},
		{"UnderApplyTxAnAppErrorUndoesTheWriteAndKeepsTheCallersRows", true, true, map[string]string{"held": "1", "caller": "3"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			ctx := context.Background()
			s := withAppTable(t, mustOpen(t))
			prepare, commit := commitWrites("acme", "k-book")
			prepare.App = func(ctx context.Context, tx turnframe.Tx) error { return s.PutAppRow(ctx, tx, "held", "1") }
			_, err := s.Apply(ctx, prepare)
			is.NoErr(err) // prepare, with an app row
			key := "k"
			if tc.dup {
				key = "held"
			}
			commit.App = func(ctx context.Context, tx turnframe.Tx) error { return s.PutAppRow(ctx, tx, key, "2") }

			if tc.applyTx {
				tx, err := s.BeginTx(ctx)
				is.NoErr(err) // begin
				defer tx.Rollback()
				_, err = tx.ExecContext(ctx, `INSERT INTO app_rows (key, value) VALUES ('caller', '3')`)
				is.NoErr(err) // the caller's own row
				_, err = s.ApplyTx(ctx, tx, commit)
				checkAppErr(is, err, tc.dup)
				is.NoErr(tx.Commit()) // the caller commits
			} else {
				_, err = s.Apply(ctx, commit)
				checkAppErr(is, err, tc.dup)
			}

			rows, err := s.AppRows(ctx)
			is.NoErr(err)           // app rows
			is.Equal(rows, tc.want) // the rows the committed writes made
			e, err := s.ByKey(ctx, "acme", "k-book")
			is.NoErr(err) // by key
			want := turnframe.JournalCommitted
			if tc.dup {
				want = turnframe.JournalExecuting
			}
			is.Equal(e.Status, want) // the commit landed with the app's rows, or not at all
		})
	}
}

// checkAppErr checks the error of a commit whose App failed (dup) or not.
func checkAppErr(is *is.I, err error, dup bool) {
	is.Helper()
	if !dup {
		is.NoErr(err) // the commit
		return
	}
	is.True(errors.Is(err, turnframe.ErrAppWrite))  // the app's writes failed
	is.True(!errors.Is(err, turnframe.ErrConflict)) // the app's UNIQUE violation is not the store's conflict
	var se *sqlite.Error
	is.True(errors.As(err, &se)) // the driver's error stays in the chain
}
