package pgstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
	"github.com/turnframe/turnframe/pgstore/pgtest"
)

// Open on a version-4 schema: migration 5 commits, migration 6 waits on a
// lock an operator holds on outbox and is cut by pg_cancel_backend. Open
// must not report ErrBusy ("nothing was written"): it wrote migration 5.
func TestOpenCutMidMigrationIsBusyAfterWriting(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	u := pgtest.Schema(t)
	pool, err := pgxpool.New(ctx, u)
	is.NoErr(err)
	defer pool.Close()
	is.NoErr(pgstore.MigrateTo(ctx, pool, 4))

	other, err := pgx.Connect(ctx, u)
	is.NoErr(err)
	defer other.Close(ctx)
	otx, err := other.Begin(ctx)
	is.NoErr(err)
	_, err = otx.Exec(ctx, `LOCK TABLE outbox IN ACCESS SHARE MODE`)
	is.NoErr(err)

	res := make(chan error, 1)
	go func() {
		s, err := pgstore.Open(ctx, u)
		if err == nil {
			s.Close()
		}
		res <- err
	}()
	cancelMyWaiter(t, other) // migration 6 waits for the lock: cut it
	err = <-res
	is.NoErr(otx.Rollback(ctx))
	var v int64
	is.NoErr(pool.QueryRow(ctx, `SELECT max(version_id) FROM `+pgstore.VersionTable).Scan(&v))
	t.Logf("Open: %v; schema now at version %d (was 4)", err, v)
	is.True(err != nil)
	if errors.Is(err, turnframe.ErrBusy) && v != 4 {
		t.Errorf("Open returned ErrBusy (nothing was written) but moved the schema from version 4 to %d", v)
	}
}
