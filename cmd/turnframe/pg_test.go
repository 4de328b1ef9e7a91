package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/user"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
	"github.com/turnframe/turnframe/pgstore/pgtest"
)

// pgSchema returns the --db of a database holding only what the test
// writes: a schema of t's own on the test server (pgtest.Schema), dropped
// when t ends. The server's URL must be a postgres:// URL, as --db takes.
func pgSchema(t *testing.T) string {
	t.Helper()
	if base := pgtest.ServerURL(t); !isPostgresURL(base) {
		t.Fatalf("%s must be a postgres:// URL for the CLI's tests, not %q", pgtest.URLEnv, redactURL(base))
	}
	return pgtest.Schema(t)
}

// mustPGFixture builds the fixture (buildFixture) in a fresh schema, through
// a store that keeps the times it is given (CallerClock), and closes it: the
// commands under test then read it on the database's clock, which is the
// host's. It returns the fixture, whose path is the --db URL.
func mustPGFixture(t *testing.T) fixture {
	t.Helper()
	db := pgSchema(t)
	store, err := pgstore.Open(context.Background(), db, pgstore.WithClock(pgstore.CallerClock))
	if err != nil {
		t.Fatalf("open a new store: %v", err)
	}
	defer store.Close()
	return buildFixture(t, store, db)
}

// openPGFixture opens the fixture's database as the application would.
func openPGFixture(t *testing.T, f fixture) *pgstore.Store {
	t.Helper()
	store, err := pgstore.Open(context.Background(), f.path)
	if err != nil {
		t.Fatalf("open the fixture: %v", err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}

// The operator commands on PostgreSQL report what they report on SQLite
// for the same fixture.
func TestPGStatus(t *testing.T) {
	f := mustPGFixture(t)
	t.Run("JSON", func(t *testing.T) {
		is := is.New(t)
		code, out, stderr := cli(t, "status", "--db", f.path, "--json")
		is.Equal(stderr, "")
		is.Equal(code, exitOK)
		var st statusJSON
		is.NoErr(json.Unmarshal([]byte(out), &st))
		is.Equal(st.Path, f.path) // the URL names the database (it has no password)
		is.Equal(st.Outbox, map[string]int{"pending": 3, "dispatching": 2, "completed": 1, "failed": 1, "outcome_unknown": 1, "needs_intervention": 0})
		is.Equal(st.Turns, map[string]int{"received": 1, "interpreted": 0, "planned": 1, "executing": 0, "committed": 0, "delivered": 4, "abandoned": 0})
		is.Equal(st.DueNow, 1)                    // the retried row only
		is.Equal(st.Held, 1)                      // the row behind the unknown one of its order key
		is.Equal(st.OldestDue.ID, f.due.String()) // not the held row
		is.Equal(st.EndedLeaseRows, 1)
		is.Equal(len(st.EndedLeases), 1)
		is.Equal(st.EndedLeases[0].ID, f.claimed.String()) // the dead worker's claim, not the live one
		is.True(strings.HasPrefix(st.EndedLeases[0].EndedAgo, "50m"))
		is.Equal(len(st.Unknown), 1)
		is.Equal(st.Unknown[0].ID, f.unknown.String())
		is.Equal(st.UnknownJournal, 1)
		is.Equal(st.UnknownEntries[0].Turn, f.unknownDelivered.String())
	})
	t.Run("Text", func(t *testing.T) {
		is := is.New(t)
		code, out, _ := cli(t, "status", "--db", f.path)
		is.Equal(code, exitOK)
		is.True(strings.Contains(out, "pending 3  dispatching 2  completed 1  failed 1  outcome_unknown 1  needs_intervention 0"))
		is.True(strings.Contains(out, "due now:             1 (and 1 held behind an earlier row of their order key)"))
		is.True(strings.Contains(out, f.claimed.String()+"  dead-worker"))
	})
}

// Listings page on PostgreSQL as on SQLite: every row once, in order,
// whatever the page, and a cut listing says where to read on.
func TestPGListingsPage(t *testing.T) {
	f := mustPGFixture(t)
	for _, l := range []struct {
		name string
		args []string
		rows int
	}{
		{"Outbox", []string{"outbox", "--db", f.path}, 8},
		{"Turns", []string{"turns", "--db", f.path}, 6},
	} {
		t.Run(l.name, func(t *testing.T) {
			is := is.New(t)
			code, whole, _ := cli(t, l.args...)
			is.Equal(code, exitOK)
			all := firstColumn(whole)
			is.Equal(len(all), l.rows) // every row of the fixture
			for _, page := range []int{1, 3, l.rows + 1} {
				code, out, stderr := cliPaged(t, page, l.args...)
				is.Equal(code, exitOK)
				is.Equal(firstColumn(out), all)             // every row once, in order, one header
				is.True(!strings.Contains(stderr, "more:")) // nothing left past the limit
			}
			code, out, stderr := cliPaged(t, 2, append(l.args, "--limit", "5")...)
			is.Equal(code, exitOK)
			is.Equal(firstColumn(out), all[:5]) // the first five
			m := moreLine.FindStringSubmatch(stderr)
			is.True(m != nil) // a "more:" line
			code, out, _ = cliPaged(t, 2, append(l.args, "--after", m[1], "--json")...)
			is.Equal(code, exitOK)
			var rows []map[string]any
			is.NoErr(json.Unmarshal([]byte(out), &rows))
			is.Equal(len(rows), l.rows-5) // the rest
			is.Equal(rows[0]["id"], all[5])
		})
	}
	t.Run("Unfinished", func(t *testing.T) {
		is := is.New(t)
		code, out, _ := cli(t, "turns", "--db", f.path, "--unfinished")
		is.Equal(code, exitOK)
		is.True(strings.Contains(out, f.planned.String()))          // a planned turn
		is.True(strings.Contains(out, f.unknownDelivered.String())) // a delivered turn holding an unknown entry
		is.True(!strings.Contains(out, f.delivered.String()))       // a finished one is not listed
	})
}

// show and history read a row and a turn by id alone on PostgreSQL.
func TestPGShowAndHistory(t *testing.T) {
	f := mustPGFixture(t)
	t.Run("ARow", func(t *testing.T) {
		is := is.New(t)
		code, out, _ := cli(t, "show", f.unknown.String(), "--db", f.path)
		is.Equal(code, exitOK)
		is.True(strings.Contains(out, "status:         outcome_unknown"))
		is.True(strings.Contains(out, `payload:        {"cents":100}`))
	})
	t.Run("ATurn", func(t *testing.T) {
		is := is.New(t)
		code, out, _ := cli(t, "show", "--db", f.path, "--json", f.delivered.String())
		is.Equal(code, exitOK)
		var v turnDetailJSON
		is.NoErr(json.Unmarshal([]byte(out), &v))
		is.Equal(v.Phase, "delivered")
		is.Equal(len(v.Journal), 6)
		is.Equal(len(v.Outbox), 6) // the turn's rows, found by its id
	})
	t.Run("HistoryOfARow", func(t *testing.T) {
		is := is.New(t)
		code, out, _ := cli(t, "history", "--db", f.path, f.unknown.String(), "--json")
		is.Equal(code, exitOK)
		var recs []map[string]any
		is.NoErr(json.Unmarshal([]byte(out), &recs))
		is.True(len(recs) >= 2)                              // enqueued, claimed, …
		is.Equal(recs[len(recs)-1]["to"], "outcome_unknown") // … and where it stands
	})
	t.Run("HistoryOfATurn", func(t *testing.T) {
		is := is.New(t)
		code, out, _ := cli(t, "history", "--db", f.path, f.delivered.String())
		is.Equal(code, exitOK)
		is.True(strings.Contains(out, "history of turn "+f.delivered.String()+" (account acme, now delivered)"))
	})
	t.Run("AnUnknownIDExits2", func(t *testing.T) {
		is := is.New(t)
		id := turnframe.NewIDGenerator().OutboxID(time.Now())
		code, _, stderr := cli(t, "show", "--db", f.path, id.String())
		is.Equal(code, exitUsage)
		is.True(strings.Contains(stderr, "no outbox row or turn has the id "+id.String()))
	})
}

// The writes work on PostgreSQL through the store's own rules.
func TestPGWrites(t *testing.T) {
	t.Run("SettleAnUnknownIDExits2", func(t *testing.T) {
		is := is.New(t)
		f := mustPGFixture(t)
		id := turnframe.NewIDGenerator().OutboxID(time.Now())
		code, _, stderr := cli(t, "settle", "--db", f.path, id.String(), "completed")
		is.Equal(code, exitUsage)
		is.True(strings.Contains(stderr, "no outbox row "+id.String()))
	})
	t.Run("SettleAndRequeueAndRelease", func(t *testing.T) {
		is := is.New(t)
		f := mustPGFixture(t)
		code, out, stderr := cli(t, "settle", "--db", f.path, f.unknown.String(), "completed", "--ref", "ch_9")
		is.Equal(stderr, "")
		is.Equal(code, exitOK)
		is.True(strings.Contains(out, "outcome_unknown → completed by operator (code operator.completed, ref ch_9)"))
		code, _, stderr = cli(t, "settle", "--db", f.path, f.failed.String(), "resend")
		is.Equal(code, exitUsage) // a failed row is not the settle's
		is.True(strings.Contains(stderr, "refused, nothing changed"))
		code, _, stderr = cli(t, "requeue", "--db", f.path, f.failed.String())
		is.Equal(stderr, "")
		is.Equal(code, exitOK)
		code, out, _ = cli(t, "release", "--db", f.path, "--json")
		is.Equal(code, exitOK)
		var rel releaseJSON
		is.NoErr(json.Unmarshal([]byte(out), &rel))
		is.Equal(rel.Expired, []string{f.claimed.String()}) // the ended lease only

		store := openPGFixture(t, f)
		ctx := context.Background()
		for id, want := range map[turnframe.OutboxID]turnframe.OutboxStatus{
			f.unknown: turnframe.OutboxCompleted, f.failed: turnframe.OutboxPending,
			f.claimed: turnframe.OutboxOutcomeUnknown, f.live: turnframe.OutboxDispatching,
		} {
			rec, err := store.GetOutbox(ctx, id)
			is.NoErr(err)
			is.Equal(rec.Status, want) // as the commands left it
		}
		last := lastRecord(t, store, turnframe.OutboxSubject(fixtureAccount, f.unknown))
		is.Equal(last.Actor, turnframe.ActorOperator) // the trail names who settled it
	})
	t.Run("Prune", func(t *testing.T) {
		is := is.New(t)
		f := mustPGFixture(t)
		code, out, _ := cli(t, "prune", "--db", f.path, "--older-than", "1m", "--json")
		is.Equal(code, exitOK)
		var res map[string]any
		is.NoErr(json.Unmarshal([]byte(out), &res))
		is.Equal(res["deleted"], 2.0) // the completed and the failed row, finished an hour ago
	})
	t.Run("ALockedRowIsBusyAndUnchanged", func(t *testing.T) {
		is := is.New(t)
		f := mustPGFixture(t)
		ctx := context.Background()
		tx := holdPGRow(t, f, f.unknown) // the application holds the row
		code, _, stderr := cli(t, "settle", "--db", f.path, "--busy-timeout", "200ms", f.unknown.String(), "completed")
		is.Equal(code, exitFailure)                                     // could not be done now
		is.True(strings.Contains(stderr, "the database stayed locked")) // said so
		is.Equal(strings.Count(strings.TrimSpace(stderr), "\n"), 0)     // in one line
		code, out, _ := cli(t, "status", "--db", f.path, "--json")      // a read does not wait for the lock
		is.Equal(code, exitOK)                                          // while the row is held
		is.True(strings.Contains(out, `"outcome_unknown": 1`))          // and the row is unchanged
		is.NoErr(tx.Rollback(ctx))
	})
}

// holdPGRow locks the outbox row id of f's database from a session of its
// own, in a transaction it leaves open until the test rolls it back or
// ends.
func holdPGRow(t *testing.T, f fixture, id turnframe.OutboxID) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, f.path)
	if err != nil {
		t.Fatalf("hold a row: connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatalf("hold a row: begin: %v", err)
	}
	t.Cleanup(func() { tx.Rollback(context.Background()) })
	if _, err := tx.Exec(ctx, "SELECT 1 FROM outbox WHERE id = $1 FOR UPDATE", id.String()); err != nil {
		t.Fatalf("hold a row: lock %v: %v", id, err)
	}
	return tx
}

// approvals, approve and deny work on PostgreSQL.
func TestPGApprove(t *testing.T) {
	is := is.New(t)
	db := pgSchema(t)
	store, err := pgstore.Open(context.Background(), db)
	is.NoErr(err)
	awaitingApproval(t, store)
	store.Close()

	code, out, _ := cli(t, "approvals", "--db", db)
	is.Equal(code, exitOK)
	is.True(strings.Contains(out, "2 journal entries await approval"))
	code, _, stderr := cli(t, "approve", "--db", db, "--account", "acme", "pay-1", "--note", "checked")
	is.Equal(stderr, "")
	is.Equal(code, exitOK)
	code, _, stderr = cli(t, "deny", "--db", db, "--account", "acme", "pay-2")
	is.Equal(stderr, "")
	is.Equal(code, exitOK)
	code, out, _ = cli(t, "status", "--db", db, "--json")
	is.Equal(code, exitOK)
	var st statusJSON
	is.NoErr(json.Unmarshal([]byte(out), &st))
	is.Equal(st.AwaitingApprovalJournal, 0) // both decided
	code, _, stderr = cli(t, "approve", "--db", db, "--account", "acme", "pay-1")
	is.Equal(code, exitUsage) // approved already
	is.True(stderr != "")
}

// The ui's pages read a PostgreSQL database, and name it by its URL.
func TestPGUIRead(t *testing.T) {
	is := is.New(t)
	f := mustPGFixture(t)
	e := &env{stdout: io.Discard, stderr: io.Discard, now: time.Now, page: 3}
	db := &dbFlags{path: f.path, busy: time.Second}
	store, err := db.open(context.Background(), e)
	is.NoErr(err)
	defer store.Close()
	s, err := newUIServer(store, db, e, uiOptions{readOnly: true, loopback: true, actor: turnframe.ActorOperator})
	is.NoErr(err)
	srv := httptest.NewServer(s.handler())
	defer srv.Close()
	u := &testUI{t: t, srv: srv, ui: s}
	code, body := u.get("/")
	is.Equal(code, http.StatusOK)
	is.True(strings.Contains(body, "<td>hang</td>"))    // rows counted per destination
	is.True(strings.Contains(body, f.unknown.String())) // the unknown row listed
	is.True(strings.Contains(body, "key-ask-remote"))   // and the unknown entry
	code, body = u.get("/id/" + f.unknown.String())     // a row's page
	is.Equal(code, http.StatusOK)
	is.True(strings.Contains(body, "outcome_unknown"))
}

// migrate makes and upgrades the schema on PostgreSQL; the other commands
// refuse a database without it, and create nothing.
func TestPGMigrateAndVersion(t *testing.T) {
	is := is.New(t)
	db := pgSchema(t)
	code, _, stderr := cli(t, "status", "--db", db)
	is.Equal(code, exitUsage)
	is.True(strings.Contains(stderr, "holds no turnframe schema")) // refused
	is.True(strings.Contains(stderr, "'turnframe migrate"))        // with what to do
	code, _, _ = cli(t, "version", "--db", db)
	is.Equal(code, exitUsage) // still nothing there: the refusal created nothing

	code, out, stderr := cli(t, "migrate", "--db", db)
	is.Equal(stderr, "")
	is.Equal(code, exitOK)
	is.True(strings.Contains(out, fmt.Sprintf("created the turnframe schema, version %d", pgstore.SchemaVersion)))
	code, out, _ = cli(t, "migrate", "--db", db)
	is.Equal(code, exitOK)
	is.True(strings.Contains(out, "already current"))
	code, out, _ = cli(t, "version", "--db", db, "--json")
	is.Equal(code, exitOK)
	var v versionJSON
	is.NoErr(json.Unmarshal([]byte(out), &v))
	is.Equal(*v.FileSchema, pgstore.SchemaVersion)
	code, _, _ = cli(t, "status", "--db", db)
	is.Equal(code, exitOK) // now it opens
}

// withPassword returns the server's URL for a fresh schema with a user and
// this password in it. Whether the server checks the password or not (a
// local trust or peer setup ignores it), no output may show it.
func withPassword(t *testing.T, db, password string) string {
	t.Helper()
	u, err := url.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	name := u.User.Username()
	if name == "" {
		me, err := user.Current()
		if err != nil {
			t.Fatal(err)
		}
		name = me.Username
	}
	u.User = url.UserPassword(name, password)
	return u.String()
}

// The password of a --db URL appears in no output of any command: not in
// status's header, the ui's page, an error of the server or a refusal, and
// not when the server cannot be reached.
func TestPGPasswordNeverShown(t *testing.T) {
	const secret = "s3cret-Pw"
	f := mustPGFixture(t)
	db := withPassword(t, f.path, secret)
	empty := withPassword(t, pgSchema(t), secret)
	unreachable := "postgres://turnframe:" + secret + "@127.0.0.1:1/nowhere?connect_timeout=2"
	missing := turnframe.NewIDGenerator().OutboxID(time.Now()).String()
	for _, args := range [][]string{
		{"status", "--db", db},
		{"status", "--db", db, "--json"},
		{"outbox", "--db", db, "--json"},
		{"turns", "--db", db},
		{"show", "--db", db, f.unknown.String()},
		{"history", "--db", db, f.unknown.String()},
		{"show", "--db", db, missing},
		{"settle", "--db", db, missing, "completed"},
		{"version", "--db", db},
		{"status", "--db", empty},
		{"version", "--db", empty},
		{"status", "--db", unreachable},
		{"migrate", "--db", unreachable},
		{"status", "--db", db + "&search_path=%00bad"},
		{"status", "--db", "postgres://turn%zzframe:" + secret + "@127.0.0.1:1/nowhere"},
	} {
		t.Run(strings.Join(args[:1], " "), func(t *testing.T) {
			is := is.New(t)
			code, out, stderr := cli(t, args...)
			is.True(!strings.Contains(out+stderr, secret)) // never shown
			if code != exitOK {
				msg, _, _ := strings.Cut(stderr, "\nrun 'turnframe "+args[0]+" -h' for help")
				is.Equal(strings.Count(strings.TrimSpace(msg), "\n"), 0) // a failure is one line (and the hint to help), never a stack
				is.True(strings.HasPrefix(stderr, "turnframe "+args[0]+": "))
			}
		})
	}
	t.Run("UnreachableExits1", func(t *testing.T) {
		is := is.New(t)
		code, _, stderr := cli(t, "status", "--db", unreachable)
		is.Equal(code, exitFailure)
		is.True(strings.Contains(stderr, "cannot connect to postgres://turnframe:xxxxx@127.0.0.1:1/nowhere"))
	})
	t.Run("UIPage", func(t *testing.T) {
		is := is.New(t)
		e := &env{stdout: io.Discard, stderr: io.Discard, now: time.Now}
		flags := &dbFlags{path: db, busy: time.Second}
		store, err := flags.open(context.Background(), e)
		if err != nil {
			is.True(!strings.Contains(e.explain(err).Error(), secret)) // a server that checks passwords refused it
			return
		}
		defer store.Close()
		s, err := newUIServer(store, flags, e, uiOptions{readOnly: true, loopback: true, actor: turnframe.ActorOperator})
		is.NoErr(err)
		srv := httptest.NewServer(s.handler())
		defer srv.Close()
		u := &testUI{t: t, srv: srv, ui: s}
		for _, path := range []string{"/", "/id/" + f.unknown.String(), "/id/" + missing, "/turns"} {
			_, body := u.get(path)
			is.True(!strings.Contains(body, secret)) // not in the title, nor in an error
		}
		_, body := u.get("/")
		is.True(strings.Contains(body, "xxxxx")) // the URL is shown, its password masked
	})
}

// On PostgreSQL too, reading on after a row the application pruned since
// the listing printed it lists every row after it.
func TestPGOutboxReadsOnAfterAPrunedLastRow(t *testing.T) {
	is := is.New(t)
	f := mustPGFixture(t)
	code, _, stderr := cli(t, "outbox", "--db", f.path, "--limit", "3")
	is.Equal(code, exitOK)
	m := moreLine.FindStringSubmatch(stderr)
	is.True(m != nil)
	is.Equal(m[1], f.completed.String()) // read on after the completed row
	n, err := openPGFixture(t, f).Prune(context.Background(), time.Now())
	is.NoErr(err)
	is.True(n >= 1) // the completed and failed rows are gone
	code, rest, stderr := cli(t, "outbox", "--db", f.path, "--after", m[1])
	is.Equal(stderr, "")
	is.Equal(code, exitOK)                                                                                       // the listing goes on
	is.Equal(firstColumn(rest), []string{f.unknown.String(), f.held.String(), f.due.String(), f.later.String()}) // every row after it, once
}

// On PostgreSQL too, the ui refuses every page and write once the
// application has migrated the database past this build's schema.
func TestPGTheUIRefusesADatabaseMigratedPastIt(t *testing.T) {
	is := is.New(t)
	f := mustPGFixture(t)
	e := &env{stdout: io.Discard, stderr: io.Discard, now: time.Now, page: 3}
	db := &dbFlags{path: f.path, busy: time.Second}
	store, err := db.open(context.Background(), e)
	is.NoErr(err)
	defer store.Close()
	s, err := newUIServer(store, db, e, uiOptions{loopback: true, actor: turnframe.ActorOperator})
	is.NoErr(err)
	srv := httptest.NewServer(s.handler())
	defer srv.Close()
	app := openPGFixture(t, f)
	u := &testUI{t: t, srv: srv, ui: s}
	code, _ := u.get("/")
	is.Equal(code, http.StatusOK) // the page is served…

	_, err = app.Pool().Exec(context.Background(), "INSERT INTO "+pgstore.VersionTable+" (version_id, is_applied) VALUES ($1, true)", pgstore.SchemaVersion+1)
	is.NoErr(err) // …until the upgraded application migrates the database
	code, body := u.get("/")
	is.Equal(code, http.StatusServiceUnavailable)
	is.True(strings.Contains(body, "newer than this turnframe"))
	form := settleForm(s.token, f.unknown, "completed", "")
	form.Set("attempt", "1")
	code, _ = u.post("/settle", form, nil)
	is.Equal(code, http.StatusServiceUnavailable) // refused
	rec, err := app.GetOutbox(context.Background(), f.unknown)
	is.NoErr(err)
	is.Equal(rec.Status, turnframe.OutboxOutcomeUnknown) // nothing written
}
