package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

func TestStatus(t *testing.T) {
	f := mustFixture(t)
	t.Run("CountsEveryStatusAndPhase", func(t *testing.T) {
		is := is.New(t)
		code, out, stderr := cli(t, "status", "--db", f.path)
		is.Equal(stderr, "")
		is.Equal(code, exitOK)
		is.True(strings.Contains(out, "pending 2  dispatching 1  completed 1  failed 1  outcome_unknown 1"))
		is.True(strings.Contains(out, "received 1  interpreted 0  planned 1  executing 0  committed 0  delivered 3  abandoned 0"))
		is.True(strings.Contains(out, "oldest due row:   "+f.due.String())) // the retried row, due since t0
		is.True(strings.Contains(out, f.claimed.String()+"  dead-worker"))  // the stale claim is listed
		is.True(strings.Contains(out, f.unknown.String()+"  acme"))         // the unknown row is listed
		is.True(strings.Contains(out, "outbox rows 1, journal entries 1"))  // both kinds of unknown are counted
		is.True(!strings.Contains(out, f.later.String()))                   // a row not due yet is no one's concern
	})
	t.Run("JSON", func(t *testing.T) {
		is := is.New(t)
		code, out, _ := cli(t, "status", "--db", f.path, "--json")
		is.Equal(code, exitOK)
		var st statusJSON
		is.NoErr(json.Unmarshal([]byte(out), &st))
		is.Equal(st.Outbox, map[string]int{"pending": 2, "dispatching": 1, "completed": 1, "failed": 1, "outcome_unknown": 1})
		is.Equal(st.Turns["delivered"], 3)
		is.Equal(st.DueNow, 1)
		is.Equal(st.OldestDue.ID, f.due.String())
		is.Equal(len(st.StaleClaims), 1)
		is.Equal(st.StaleClaims[0].ID, f.claimed.String())
		is.Equal(len(st.Unknown), 1)
		is.Equal(st.Unknown[0].ID, f.unknown.String())
		is.Equal(st.UnknownJournal, 1)
	})
	t.Run("AClaimYoungerThanClaimAgeIsNotStale", func(t *testing.T) {
		is := is.New(t)
		code, out, _ := cli(t, "status", "--db", f.path, "--json", "--claim-age", "1000h")
		is.Equal(code, exitOK)
		var st statusJSON
		is.NoErr(json.Unmarshal([]byte(out), &st))
		is.Equal(len(st.StaleClaims), 0)
	})
}

func TestOutbox(t *testing.T) {
	f := mustFixture(t)
	t.Run("ListsEveryRowOldestFirst", func(t *testing.T) {
		is := is.New(t)
		code, out, _ := cli(t, "outbox", "--db", f.path)
		is.Equal(code, exitOK)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		is.Equal(len(lines), 7) // a header and six rows
		is.True(strings.HasPrefix(lines[0], "ID "))
		is.True(strings.HasPrefix(lines[1], f.claimed.String()))
	})
	t.Run("FiltersByStatus", func(t *testing.T) {
		is := is.New(t)
		code, out, _ := cli(t, "outbox", "--db", f.path, "--status", "failed", "--json")
		is.Equal(code, exitOK)
		var rows []outboxJSON
		is.NoErr(json.Unmarshal([]byte(out), &rows))
		is.Equal(len(rows), 1)
		is.Equal(rows[0].ID, f.failed.String())
		is.Equal(rows[0].LastCode, "http.400")
		is.Equal(rows[0].RemoteKey, "4.acme.key-refuse")
		is.Equal(rows[0].Payload, `{"cents":100}`)
	})
	t.Run("FiltersByAccountAndLimit", func(t *testing.T) {
		is := is.New(t)
		code, out, _ := cli(t, "outbox", "--db", f.path, "--account", "someone-else", "--json")
		is.Equal(code, exitOK)
		is.Equal(strings.TrimSpace(out), "[]") // another tenant has no rows
		code, out, _ = cli(t, "outbox", "--db", f.path, "--account", "acme", "--limit", "2", "--json")
		is.Equal(code, exitOK)
		var rows []outboxJSON
		is.NoErr(json.Unmarshal([]byte(out), &rows))
		is.Equal(len(rows), 2)
	})
}

func TestTurns(t *testing.T) {
	f := mustFixture(t)
	t.Run("UnfinishedWithRecoveryDecisions", func(t *testing.T) {
		is := is.New(t)
		code, out, _ := cli(t, "turns", "--unfinished", "--db", f.path, "--json")
		is.Equal(code, exitOK)
		var turns []turnJSON
		is.NoErr(json.Unmarshal([]byte(out), &turns))
		got := map[string]string{}
		for _, tj := range turns {
			got[tj.ID] = tj.Recovery
		}
		is.Equal(got, map[string]string{
			f.planned.String():          "resume_commands",
			f.received.String():         "restart_interpretation",
			f.unknownDelivered.String(): "reconcile_external", // delivered, yet unfinished
		})
	})
	t.Run("AllTurnsAsATable", func(t *testing.T) {
		is := is.New(t)
		code, out, _ := cli(t, "turns", "--db", f.path)
		is.Equal(code, exitOK)
		is.Equal(len(strings.Split(strings.TrimSpace(out), "\n")), 6) // a header and five turns
		is.True(strings.Contains(out, f.delivered.String()+"  acme     delivered"))
	})
	t.Run("AnotherAccountHasNone", func(t *testing.T) {
		is := is.New(t)
		code, out, _ := cli(t, "turns", "--unfinished", "--account", "nobody", "--db", f.path)
		is.Equal(code, exitOK)
		is.Equal(len(strings.Split(strings.TrimSpace(out), "\n")), 1) // the header alone
	})
}

func TestShow(t *testing.T) {
	f := mustFixture(t)
	t.Run("AnOutboxRow", func(t *testing.T) {
		is := is.New(t)
		code, out, _ := cli(t, "show", f.unknown.String(), "--db", f.path)
		is.Equal(code, exitOK)
		is.True(strings.Contains(out, "status:       outcome_unknown"))
		is.True(strings.Contains(out, `payload:      {"cents":100}`))
	})
	t.Run("ATurnWithItsJournalEventsAndRows", func(t *testing.T) {
		is := is.New(t)
		code, out, _ := cli(t, "show", "--db", f.path, "--json", f.delivered.String())
		is.Equal(code, exitOK)
		var v turnDetailJSON
		is.NoErr(json.Unmarshal([]byte(out), &v))
		is.Equal(v.Kind, "turn")
		is.Equal(v.Phase, "delivered")
		is.Equal(v.Response, "done")
		is.Equal(len(v.Journal), 5)
		is.Equal(len(v.Events), 5)
		is.Equal(len(v.Outbox), 5)
		is.Equal(v.Recovery, "nothing")
	})
	t.Run("ATurnAsText", func(t *testing.T) {
		is := is.New(t)
		code, out, _ := cli(t, "show", "--db", f.path, f.unknownDelivered.String())
		is.Equal(code, exitOK)
		is.True(strings.Contains(out, "recovery:      reconcile_external"))
		is.True(strings.Contains(out, "key-ask-remote  ask-remote  order/1  outcome_unknown"))
	})
	t.Run("AnUnknownIDExits2", func(t *testing.T) {
		is := is.New(t)
		code, _, stderr := cli(t, "show", "--db", f.path, "01J9Z3K8Q5R6S7T8V9W0X1Y2Z3")
		is.Equal(code, exitUsage)
		is.True(strings.Contains(stderr, "no outbox row or turn has the id 01J9Z3K8Q5R6S7T8V9W0X1Y2Z3"))
	})
}

func TestSettle(t *testing.T) {
	f := mustFixture(t)
	t.Run("AnUnknownRowCompleted", func(t *testing.T) {
		is := is.New(t)
		code, out, stderr := cli(t, "settle", "--db", f.path, f.unknown.String(), "completed")
		is.Equal(stderr, "")
		is.Equal(code, exitOK)
		is.True(strings.Contains(out, "outcome_unknown → completed"))
		rec, err := openFixture(t, f).GetOutbox(context.Background(), f.unknown)
		is.NoErr(err)
		is.Equal(rec.Status, turnframe.OutboxCompleted)
		is.Equal(rec.LastCode, "operator.completed")
	})
	t.Run("ARowThatIsNotUnknownExits2Unchanged", func(t *testing.T) {
		is := is.New(t)
		code, _, stderr := cli(t, "settle", "--db", f.path, f.failed.String(), "resend", "--code", "x")
		is.Equal(code, exitUsage)
		is.True(strings.Contains(stderr, "is failed; only an outcome_unknown row is resolved"))
		rec, err := openFixture(t, f).GetOutbox(context.Background(), f.failed)
		is.NoErr(err)
		is.Equal(rec.Status, turnframe.OutboxFailed)
	})
	t.Run("AnUnknownIDExits2", func(t *testing.T) {
		is := is.New(t)
		code, _, stderr := cli(t, "settle", "--db", f.path, "01J9Z3K8Q5R6S7T8V9W0X1Y2Z3", "failed")
		is.Equal(code, exitUsage)
		is.True(strings.Contains(stderr, "no outbox row 01J9Z3K8Q5R6S7T8V9W0X1Y2Z3"))
	})
}

func TestRequeue(t *testing.T) {
	f := mustFixture(t)
	t.Run("AFailedRowIsPendingAgain", func(t *testing.T) {
		is := is.New(t)
		code, out, _ := cli(t, "requeue", "--db", f.path, f.failed.String())
		is.Equal(code, exitOK)
		is.True(strings.Contains(out, "failed (http.400) → pending"))
		rec, err := openFixture(t, f).GetOutbox(context.Background(), f.failed)
		is.NoErr(err)
		is.Equal(rec.Status, turnframe.OutboxPending)
	})
	t.Run("ARowThatIsNotFailedExits2", func(t *testing.T) {
		is := is.New(t)
		code, _, stderr := cli(t, "requeue", "--db", f.path, f.completed.String())
		is.Equal(code, exitUsage)
		is.True(strings.Contains(stderr, "only a failed row is requeued"))
	})
}

func TestRelease(t *testing.T) {
	f := mustFixture(t)
	t.Run("AYoungerCutoffReleasesNothing", func(t *testing.T) {
		is := is.New(t)
		code, out, _ := cli(t, "release", "--db", f.path, "--older-than", "2d", "--json")
		is.Equal(code, exitOK)
		var v struct{ Released []string }
		is.NoErr(json.Unmarshal([]byte(out), &v))
		is.Equal(len(v.Released), 0)
	})
	t.Run("TheDeadWorkersClaimGoesBack", func(t *testing.T) {
		is := is.New(t)
		code, out, _ := cli(t, "release", "--db", f.path, "--older-than", "10m")
		is.Equal(code, exitOK)
		is.True(strings.Contains(out, "released 1 claim(s)"))
		is.True(strings.Contains(out, f.claimed.String()))
		rec, err := openFixture(t, f).GetOutbox(context.Background(), f.claimed)
		is.NoErr(err)
		is.Equal(rec.Status, turnframe.OutboxPending)
		is.Equal(rec.Attempts, 1) // attempts kept
	})
}

func TestPrune(t *testing.T) {
	f := mustFixture(t)
	t.Run("KeepsRowsFinishedAfterTheCutoff", func(t *testing.T) {
		is := is.New(t)
		code, out, _ := cli(t, "prune", "--db", f.path, "--older-than", "2h")
		is.Equal(code, exitOK)
		is.True(strings.Contains(out, "deleted 0 finished row(s)"))
	})
	t.Run("DeletesFinishedRowsButNeverAKey", func(t *testing.T) {
		is := is.New(t)
		code, out, _ := cli(t, "prune", "--db", f.path, "--older-than", "30m", "--json")
		is.Equal(code, exitOK)
		var v struct{ Deleted int }
		is.NoErr(json.Unmarshal([]byte(out), &v))
		is.Equal(v.Deleted, 2) // the completed and the failed row
		store := openFixture(t, f)
		_, err := store.GetOutbox(context.Background(), f.completed)
		is.True(errors.Is(err, turnframe.ErrNotFound))
		e, err := store.ByKey(context.Background(), fixtureAccount, "key-ok")
		is.NoErr(err) // the key still deduplicates
		is.Equal(e.Status, turnframe.JournalCommitted)
	})
}

func TestMigrateAndVersion(t *testing.T) {
	t.Run("MigrateCreatesAFileTheOtherCommandsOpen", func(t *testing.T) {
		is := is.New(t)
		path := t.TempDir() + "/new.db"
		code, out, _ := cli(t, "migrate", "--db", path)
		is.Equal(code, exitOK)
		is.True(strings.Contains(out, "schema version 1"))
		code, out, _ = cli(t, "version", "--db", path, "--json")
		is.Equal(code, exitOK)
		var v versionJSON
		is.NoErr(json.Unmarshal([]byte(out), &v))
		is.Equal(*v.FileSchema, v.Schema)
		code, _, _ = cli(t, "status", "--db", path)
		is.Equal(code, exitOK)
	})
	t.Run("MigrateTwiceChangesNothing", func(t *testing.T) {
		is := is.New(t)
		path := t.TempDir() + "/twice.db"
		code, _, _ := cli(t, "migrate", "--db", path)
		is.Equal(code, exitOK)
		code, out, _ := cli(t, "migrate", "--db", path)
		is.Equal(code, exitOK)
		is.True(strings.Contains(out, "schema version 1"))
	})
	t.Run("VersionWithoutAFile", func(t *testing.T) {
		is := is.New(t)
		code, out, _ := cli(t, "version")
		is.Equal(code, exitOK)
		is.True(strings.Contains(out, "schema:"))
	})
}

// TestBusyDatabase holds the write lock from a second Store on the file, as
// a running application would, while the commands run.
func TestBusyDatabase(t *testing.T) {
	f := mustFixture(t)
	ctx := context.Background()
	app, err := sqlitestore.Open(ctx, f.path, sqlitestore.WithExisting())
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	tx, err := app.BeginTx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	// BEGIN IMMEDIATE takes the write lock at once; write something to be sure.
	if _, err := tx.ExecContext(ctx, "UPDATE turns SET updated_at = updated_at WHERE id = ?", f.delivered.String()); err != nil {
		t.Fatal(err)
	}

	for _, args := range [][]string{
		{"settle", f.unknown.String(), "failed"},
		{"requeue", f.failed.String()},
		{"release", "--older-than", "10m"},
		{"prune", "--older-than", "1m"},
	} {
		t.Run("AWriteWaitsThenFails_"+args[0], func(t *testing.T) {
			is := is.New(t)
			code, _, stderr := cli(t, append(args, "--db", f.path, "--busy-timeout", "50ms")...)
			is.Equal(code, exitFailure)                         // not a usage error: it may work later
			is.True(strings.Contains(stderr, "--busy-timeout")) // it says why
			is.True(strings.Contains(stderr, "nothing was changed"))
		})
	}
	for _, args := range [][]string{
		{"status"}, {"outbox"}, {"turns", "--unfinished"}, {"show", f.delivered.String()}, {"version"},
	} {
		t.Run("AReadWorks_"+args[0], func(t *testing.T) {
			is := is.New(t)
			code, _, stderr := cli(t, append(args, "--db", f.path, "--busy-timeout", "50ms")...)
			is.Equal(stderr, "")
			is.Equal(code, exitOK)
		})
	}
	is := is.New(t)
	is.NoErr(tx.Rollback())
	code, _, _ := cli(t, "requeue", f.failed.String(), "--db", f.path, "--busy-timeout", "50ms")
	is.Equal(code, exitOK) // once the lock is gone, the same write goes through
}

// TestNotATurnframeDatabase runs every command that opens a database on files
// that are not one: each must fail with exit 2 and leave the file as it was.
func TestNotATurnframeDatabase(t *testing.T) {
	dir := t.TempDir()
	text := dir + "/notes.txt"
	if err := os.WriteFile(text, []byte("not a database\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := dir + "/empty.db"
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	other := dir + "/other.db"
	mustPlainSQLite(t, other)

	commands := [][]string{
		{"status"}, {"outbox"}, {"turns"}, {"turns", "--unfinished"},
		{"show", "01J9Z3K8Q5R6S7T8V9W0X1Y2Z3"},
		{"settle", "01J9Z3K8Q5R6S7T8V9W0X1Y2Z3", "completed"},
		{"requeue", "01J9Z3K8Q5R6S7T8V9W0X1Y2Z3"},
		{"release", "--older-than", "1h"}, {"prune", "--older-than", "1h"},
		{"version"},
	}
	for _, file := range []struct{ name, path string }{
		{"PlainText", text}, {"EmptyFile", empty}, {"SQLiteWithoutTheSchema", other},
	} {
		for _, args := range commands {
			t.Run(file.name+"_"+strings.Join(args[:1], ""), func(t *testing.T) {
				is := is.New(t)
				before := snapshot(t, dir)
				code, _, stderr := cli(t, append(args, "--db", file.path)...)
				is.Equal(code, exitUsage)
				is.True(strings.Contains(stderr, "is not a turnframe database")) // it says so
				is.Equal(snapshot(t, dir), before)                               // not a byte changed, no file added
			})
		}
	}
	t.Run("MigrateRefusesPlainText", func(t *testing.T) {
		is := is.New(t)
		before := snapshot(t, dir)
		code, _, _ := cli(t, "migrate", "--db", text)
		is.True(code != exitOK)
		is.Equal(snapshot(t, dir)[text], before[text])
	})
	t.Run("AMissingFileIsNotCreated", func(t *testing.T) {
		is := is.New(t)
		missing := dir + "/missing.db"
		code, _, stderr := cli(t, "status", "--db", missing)
		is.Equal(code, exitUsage)
		is.True(strings.Contains(stderr, "no turnframe database at"))
		_, err := os.Stat(missing)
		is.True(errors.Is(err, os.ErrNotExist)) // nothing was created
	})
}

// snapshot returns every file of dir with its content.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]string)
	for _, e := range entries {
		b, err := os.ReadFile(dir + "/" + e.Name())
		if err != nil {
			t.Fatal(err)
		}
		out[dir+"/"+e.Name()] = string(b)
	}
	return out
}
