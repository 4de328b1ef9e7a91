package pgstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
	"github.com/turnframe/turnframe/storetest"
)

var _ storetest.AppStore = appStore{}

// appStore is a pgstore as the conformance suite's App subtests use it: the
// application's rows are a table of its own in the test's schema, written on
// the pgx.Tx PgxTx returns.
type appStore struct{ *pgstore.Store }

// appTableSQL is the application's table of the tests.
const appTableSQL = `CREATE TABLE app_rows (key text PRIMARY KEY, value text NOT NULL)`

// withAppTable creates the application's table next to s's, which must
// succeed.
func withAppTable(t testing.TB, s *pgstore.Store) appStore {
	t.Helper()
	if _, err := s.Pool().Exec(context.Background(), appTableSQL); err != nil {
		t.Fatalf("create the app table: %v", err)
	}
	return appStore{s}
}

func (s appStore) PutAppRow(ctx context.Context, tx turnframe.Tx, key, value string) error {
	pgxTx, ok := pgstore.PgxTx(tx)
	if !ok {
		return fmt.Errorf("not a pgstore transaction: %T", tx)
	}
	_, err := pgxTx.Exec(ctx, `INSERT INTO app_rows (key, value) VALUES ($1, $2)`, key, value)
	return err
}

// AppRows reads the committed rows.
func (s appStore) AppRows(ctx context.Context) (map[string]string, error) {
	rows, err := s.Pool().Query(ctx, `SELECT key, value FROM app_rows`)
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
