package pgstore_test

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
	"github.com/turnframe/turnframe/pgstore/pgtest"
)

// Four edges an outside attack found in pgstore, kept as their regression
// tests: a savepoint release a context kept from the server, an App that
// swallowed its own SQL error, a search_path whose first schema holds no
// turnframe schema, and a time moved into the caller's frame twice.

// ApplyTx promises: "w is written under a savepoint: after an error, tx
// holds nothing of w and everything the caller wrote before, so the caller
// may go on and commit its own rows." A context that ends after the Write's
// statements ran but before the savepoint is released (here the App ends
// it, deterministically; in production a deadline firing at that instant)
// makes ApplyTx return an error — yet the savepoint is neither released nor
// rolled back, so the caller's commit commits the whole Write.
func TestApplyTxThatFailsAfterItsStatementsLeavesNothingOfTheWrite(t *testing.T) {
	is := is.New(t)
	s := mustOpen(t, pgstore.WithClock(pgstore.CallerClock))
	ids := turnframe.NewIDGenerator()
	turn := ids.TurnID(base)

	tx, err := s.BeginTx(context.Background())
	is.NoErr(err)
	ctx, cancel := context.WithCancel(context.Background())
	_, err = s.ApplyTx(ctx, tx, turnframe.Write{Account: "acme", Turn: turn, Now: base,
		Begin: &turnframe.StoredTurn{Account: "acme", ID: turn, Conversation: ids.ConversationID(base), Text: "hi"},
		App: func(context.Context, turnframe.Tx) error {
			cancel() // the caller's deadline fires now, after the Write's statements ran
			return nil
		}})
	t.Logf("ApplyTx: %v", err)
	is.True(err != nil) // ApplyTx reports that it failed

	is.NoErr(tx.Commit(context.Background())) // the caller goes on and commits its own rows, as documented

	_, lerr := s.LoadTurn(context.Background(), "acme", turn)
	t.Logf("LoadTurn after the caller's commit: %v", lerr)
	is.True(errors.Is(lerr, turnframe.ErrNotFound)) // nothing of the failed Write may have been committed
}

// An App whose statement fails but which returns nil (it treats a unique
// violation as "already there", a common idiom) leaves PostgreSQL's
// transaction aborted. Apply must then report a sentinel the caller can act
// on — the App's failure is ErrAppWrite (DESIGN.md §6; §4: "Stores
// translate their driver's errors into these at their boundary") — and not
// a raw driver error. On SQLite the same App commits the Write.
func TestAnAppThatSwallowsItsSQLErrorIsErrAppWrite(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s := withAppTable(t, mustOpen(t, pgstore.WithClock(pgstore.CallerClock)))
	_, err := s.Pool().Exec(ctx, `INSERT INTO app_rows (key, value) VALUES ('dup', 'x')`)
	is.NoErr(err)
	ids := turnframe.NewIDGenerator()
	turn := ids.TurnID(base)
	_, err = s.Apply(ctx, turnframe.Write{Account: "acme", Turn: turn, Now: base,
		Begin: &turnframe.StoredTurn{Account: "acme", ID: turn, Conversation: ids.ConversationID(base), Text: "hi"},
		App: func(ctx context.Context, tx turnframe.Tx) error {
			_ = s.PutAppRow(ctx, tx, "dup", "y") // ignored: "already there"
			return nil
		}})
	t.Logf("Apply: %v", err)
	is.True(err != nil) // nothing was committed, so it must fail...
	sentinel := false
	for _, s := range []error{turnframe.ErrAppWrite, turnframe.ErrConflict, turnframe.ErrBusy,
		turnframe.ErrInvalid, turnframe.ErrNotFound, turnframe.ErrClosed} {
		sentinel = sentinel || errors.Is(err, s)
	}
	is.True(sentinel) // ...with one of turnframe's errors (ErrAppWrite)
	_, lerr := s.LoadTurn(ctx, "acme", turn)
	is.True(errors.Is(lerr, turnframe.ErrNotFound)) // and nothing was written
}

// schemaOf returns the search_path of a pgtest.Schema URL.
func schemaOf(t *testing.T, u string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return p.Query().Get("search_path")
}

// DatabaseVersion and WithExisting are documented to look at "the first
// schema of its search_path" (existing.go), which is where Migrate (goose)
// creates the tables. With search_path "a,b" where only b holds turnframe's
// schema, the first schema holds none: DatabaseVersion must say 0 and
// WithExisting must refuse (SchemaError wrapping ErrNotFound). Instead it
// finds b's version table through the whole search_path (to_regclass), so
// an operator tool opens b's tables, and `turnframe migrate` on the same URL
// prints "already current" while it creates a whole empty schema in a —
// after which the application's Open on that URL silently uses the empty
// tables of a and no longer sees b's rows.
func TestDatabaseVersionReadsTheFirstSchemaOnly(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	a, b := pgtest.Schema(t), pgtest.Schema(t)
	sb := mustOpenURL(t, b, pgstore.WithClock(pgstore.CallerClock)) // b holds turnframe's schema
	ids := turnframe.NewIDGenerator()
	turn := ids.TurnID(base)
	_, err := sb.Apply(ctx, turnframe.Write{Account: "acme", Turn: turn, Now: base,
		Begin: &turnframe.StoredTurn{Account: "acme", ID: turn, Conversation: ids.ConversationID(base), Text: "hi"}})
	is.NoErr(err)

	both := pgtest.WithParams(t, pgtest.ServerURL(t), url.Values{"search_path": {schemaOf(t, a) + "," + schemaOf(t, b)}})
	pool, err := pgxpool.New(ctx, both)
	is.NoErr(err)
	defer pool.Close()

	v, err := pgstore.DatabaseVersion(ctx, pool)
	is.NoErr(err)
	t.Logf("DatabaseVersion(search_path=a,b) = %d", v)

	_, oerr := pgstore.New(ctx, pool, pgstore.WithExisting())
	t.Logf("New WithExisting: %v", oerr)

	// Migrate on that URL refuses to create an empty schema in a that
	// would hide b's (TestOpenNeverShadowsAStoreLaterOnTheSearchPathWithANewOne).
	merr := pgstore.Migrate(ctx, pool)
	t.Logf("Migrate: %v", merr)

	is.Equal(v, int64(0))                           // the first schema holds no turnframe schema
	is.True(errors.Is(oerr, turnframe.ErrNotFound)) // so WithExisting refuses it
	is.True(errors.Is(merr, turnframe.ErrInvalid))  // and Migrate will not shadow b's
}

// In DatabaseClock mode, TurnPhase must return the turn's UpdatedAt in the
// caller's frame, as LoadTurn does (and as every store returns it: the
// marker of a turn is its phase and its update time). A host whose clock
// is an hour behind the database's gets back the time it wrote.
func TestTurnPhaseMovesItsTimeIntoTheCallersFrameOnce(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	clock := func() time.Time { return time.Now().Add(-time.Hour) }
	s := mustOpen(t, pgstore.WithHostClock(clock)) // DatabaseClock is the default
	ids := turnframe.NewIDGenerator()
	now := clock().UTC().Truncate(time.Microsecond)
	turn := ids.TurnID(now)
	_, err := s.Apply(ctx, turnframe.Write{Account: "acme", Turn: turn, Now: now,
		Begin: &turnframe.StoredTurn{Account: "acme", ID: turn, Conversation: ids.ConversationID(now), Text: "hi"}})
	is.NoErr(err)

	loaded, err := s.LoadTurn(ctx, "acme", turn)
	is.NoErr(err)
	marker, err := s.TurnPhase(ctx, "acme", turn)
	is.NoErr(err)
	t.Logf("written %v, LoadTurn %v, TurnPhase %v", now, loaded.UpdatedAt, marker.UpdatedAt)
	d := marker.UpdatedAt.Sub(loaded.UpdatedAt)
	// The frames differ by an hour: a time moved twice, or not at all, is
	// an hour off. Each read measures the offset anew, so the two may
	// differ by a loaded machine's delay between round trips, never by
	// minutes.
	is.True(d < 10*time.Minute && d > -10*time.Minute) // TurnPhase and LoadTurn agree on the update time
}

// An App that panics under ApplyTx: a caller that recovers the panic and
// commits its transaction commits nothing of the Write.
func TestApplyTxWhoseAppPanicsLeavesNothingOfTheWrite(t *testing.T) {
	is := is.New(t)
	s := mustOpen(t, pgstore.WithClock(pgstore.CallerClock))
	ids := turnframe.NewIDGenerator()
	turn := ids.TurnID(base)
	tx, err := s.BeginTx(context.Background())
	is.NoErr(err)
	func() {
		defer func() { _ = recover() }()
		_, _ = s.ApplyTx(context.Background(), tx, turnframe.Write{Account: "acme", Turn: turn, Now: base,
			Begin: &turnframe.StoredTurn{Account: "acme", ID: turn, Conversation: ids.ConversationID(base), Text: "hi"},
			App:   func(context.Context, turnframe.Tx) error { panic("app bug") }})
	}()
	is.NoErr(tx.Commit(context.Background())) // the caller commits
	_, err = s.LoadTurn(context.Background(), "acme", turn)
	is.True(errors.Is(err, turnframe.ErrNotFound)) // nothing of the Write whose App panicked
}
