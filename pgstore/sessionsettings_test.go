package pgstore_test

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
	"github.com/turnframe/turnframe/pgstore/pgtest"
)

// settingInTx returns setting as the store's write transactions see it: an
// App reads it on the store's transaction.
func settingInTx(t *testing.T, s *pgstore.Store, setting string) string {
	t.Helper()
	var got string
	_, _, err := beginAdmitting(context.Background(), s, turnframe.NewIDGenerator(), "read-"+turnframe.IdempotencyKey(setting),
		func(ctx context.Context, tx turnframe.Tx) error {
			ptx, _ := pgstore.PgxTx(tx)
			return ptx.QueryRow(ctx, `SELECT current_setting($1)`, setting).Scan(&got)
		})
	if err != nil {
		t.Fatalf("read %s: %v", setting, err)
	}
	return got
}

// A commit the store acknowledged is one the server made durable: a
// settled key never runs twice (I14), a claimed row is sent once per claim.
// With synchronous_commit off the server acknowledges a COMMIT before its
// WAL reaches disk, and a crash in the next moments loses it: the key's
// settlement, the claim that a worker is now sending under, an admitted
// key — after the restart the command runs again, the row is claimed and
// sent again. An application turns it off for its own bulk writes with a
// plain SET on a pooled connection (an App on the store's transaction, or
// its own statements on a pool it shares with New), or for a whole
// database or role (ALTER ... SET synchronous_commit = off); the store's
// next transactions on those sessions committed without waiting. The
// store's transactions wait for their commit to be durable, and leave a
// stronger setting (remote_apply) as it is.
func TestTheStoresCommitsAreDurableWhateverTheSessionSays(t *testing.T) {
	tests := []struct {
		name   string
		params url.Values // the URL's: a role's or database's default acts alike
		app    string     // what an earlier App left on the session
		want   string
	}{
		{name: "an App's SET synchronous_commit = off", app: "SET synchronous_commit = off", want: "on"},
		{name: "the URL's local", params: url.Values{"synchronous_commit": {"local"}}, want: "on"},
		{name: "the URL's remote_apply, stronger, kept", params: url.Values{"synchronous_commit": {"remote_apply"}}, want: "remote_apply"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			params := url.Values{"pool_max_conns": {"1"}}
			for k, v := range tt.params {
				params[k] = v
			}
			s := mustOpenURL(t, pgtest.WithParams(t, pgtest.Schema(t), params))
			if tt.app != "" {
				_, _, err := beginAdmitting(context.Background(), s, turnframe.NewIDGenerator(), "bulk", appRuns(tt.app))
				is.NoErr(err) // the app's setting, left on the session
			}
			is.Equal(settingInTx(t, s, "synchronous_commit"), tt.want) // the store's transaction waits for a durable commit
		})
	}
}

// Open's connections wait at most the URL's lock_timeout (or
// DefaultLockTimeout) for a lock, so that a session keeping a row locked
// holds a settlement or a recovery pass no longer than that (DESIGN.md
// §14). An App that runs a statement of its own with no bound — SET
// lock_timeout = 0, without LOCAL, as a migration tool or a batch job does
// — left it on the pooled session, and every later call of the store on
// that connection waited for as long as the lock was held: here until the
// caller's deadline.
func TestALockTimeoutAnAppLeftOnTheSessionNeverLetsTheStoreWaitForEver(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	u := pgtest.Schema(t)
	s := mustOpenURL(t, pgtest.WithParams(t, u, url.Values{"pool_max_conns": {"1"}, "lock_timeout": {"100"}}))
	ids := turnframe.NewIDGenerator()
	turn, _, err := beginAdmitting(ctx, s, ids, "pay-1", appRuns("SET lock_timeout = 0"))
	is.NoErr(err) // the app's setting, left on the session

	holder, err := pgx.Connect(ctx, u)
	is.NoErr(err)
	defer holder.Close(ctx)
	htx, err := holder.Begin(ctx)
	is.NoErr(err)
	defer htx.Rollback(ctx)
	_, err = htx.Exec(ctx, `SELECT 1 FROM turns WHERE id = $1 FOR UPDATE`, turn.String())
	is.NoErr(err) // a session keeps the turn locked

	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = s.Apply(cctx, turnframe.Write{Account: "acme", Turn: turn, Now: time.Now(),
		Admit: []turnframe.Command{{Key: "pay-2", Case: "c", Name: "pay"}}})
	t.Logf("apply: %v", err)
	is.True(errors.Is(err, turnframe.ErrBusy)) // the store's lock_timeout ended the wait, not the caller's deadline
}

// pgx speaks UTF-8, and tells the server so when it connects; a session an
// application switched with a plain SET client_encoding (a legacy report
// that reads LATIN1) has the server read the store's UTF-8 as LATIN1: the
// key "clé" was admitted as "clÃ©", which no other session's "clé"
// matches, so the same command was admitted again as new there (I14: a
// settled key never runs twice).
func TestAKeyAdmittedOnASessionLeftInAnotherEncodingIsTheSameKey(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	u := pgtest.Schema(t)
	s := mustOpenURL(t, pgtest.WithParams(t, u, url.Values{"pool_max_conns": {"1"}}))
	ids := turnframe.NewIDGenerator()
	_, _, err := beginAdmitting(ctx, s, ids, "report", appRuns("SET client_encoding = 'LATIN1'"))
	is.NoErr(err) // the app's setting, left on the session
	first, _, err := beginAdmitting(ctx, s, ids, "clé", nil)
	is.NoErr(err)

	other := mustOpenURL(t, u) // another process, its sessions in UTF-8
	_, applied, err := beginAdmitting(ctx, other, ids, "clé", nil)
	is.NoErr(err)
	is.Equal(applied.Earlier[0].Turn, first)                                  // the key is known, as the first turn's (I14)
	is.Equal(applied.Earlier[0].Command.Key, turnframe.IdempotencyKey("clé")) // spelled as admitted
}
