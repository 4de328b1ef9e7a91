package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/schema"
	"github.com/turnframe/turnframe/sqlitestore"
)

func TestStatus(t *testing.T) {
	f := mustFixture(t)
	t.Run("CountsEveryStatusAndPhase", func(t *testing.T) {
		is := is.New(t)
		code, out, stderr := cli(t, "status", "--db", f.path)
		is.Equal(stderr, "")
		is.Equal(code, exitOK)
		is.True(strings.Contains(out, "pending 3  dispatching 2  completed 1  failed 1  outcome_unknown 1  needs_intervention 0"))
		is.True(strings.Contains(out, "received 1  interpreted 0  planned 1  executing 0  committed 0  delivered 4  abandoned 0"))
		is.True(strings.Contains(out, "oldest due row:      "+f.due.String()))                  // the retried row, due since t0
		is.True(strings.Contains(out, f.unknown.String()+"  acme"))                             // the unknown row is listed
		is.True(strings.Contains(out, "acme     key-ask-remote  ask-remote"))                   // and so is the unknown entry
		is.True(strings.Contains(out, "outcome unknown:     outbox rows 1, journal entries 1")) // both kinds of unknown are counted
		is.True(strings.Contains(out, "needs intervention:  outbox rows 0, journal entries 0")) // nothing needs a person yet
		is.True(!strings.Contains(out, f.later.String()))                                       // a row not due yet is no one's concern
	})
	t.Run("JSON", func(t *testing.T) {
		is := is.New(t)
		code, out, _ := cli(t, "status", "--db", f.path, "--json")
		is.Equal(code, exitOK)
		var st statusJSON
		is.NoErr(json.Unmarshal([]byte(out), &st))
		is.Equal(st.Outbox, map[string]int{"pending": 3, "dispatching": 2, "completed": 1, "failed": 1, "outcome_unknown": 1, "needs_intervention": 0})
		is.Equal(st.Turns["delivered"], 4)
		is.Equal(st.OldestDue.ID, f.due.String())
		is.Equal(len(st.Unknown), 1)
		is.Equal(st.Unknown[0].ID, f.unknown.String())
		is.Equal(st.Unknown[0].LastCode, "http.timeout") // the sender's code, kept on an unknown row
		is.Equal(st.UnknownJournal, 1)
		is.Equal(len(st.UnknownEntries), 1)
		is.Equal(st.UnknownEntries[0].Key, "key-ask-remote")
		is.Equal(st.UnknownEntries[0].Turn, f.unknownDelivered.String()) // what settle and history need
		is.Equal(st.NeedsInterventionRows, 0)
		is.Equal(len(st.NeedsIntervention), 0)
	})
	// Issue 12, item 13: a held row is not due, and is never named the
	// oldest due row.
	t.Run("HeldRowsAreNotDue", func(t *testing.T) {
		is := is.New(t)
		code, out, _ := cli(t, "status", "--db", f.path, "--json")
		is.Equal(code, exitOK)
		var st map[string]any
		is.NoErr(json.Unmarshal([]byte(out), &st))
		is.Equal(st["due_now"], 1.0)                                      // only the retried row: a claim would take it and nothing else
		is.Equal(st["held"], 1.0)                                         // the row behind the unknown one of its order key
		is.Equal(st["oldest_due"].(map[string]any)["id"], f.due.String()) // not the held row, though it has been due longer

		code, out, _ = cli(t, "status", "--db", f.path)
		is.Equal(code, exitOK)
		is.True(strings.Contains(out, "due now:             1 (and 1 held behind an earlier row of their order key)"))
		is.True(!strings.Contains(out, f.held.String())) // the held row is named nowhere
	})
	// Issue 11, item 5: status shows the claims whose lease ended, and how
	// long ago, instead of claims older than a guessed age.
	t.Run("ShowsEndedLeasesNotLiveOnes", func(t *testing.T) {
		is := is.New(t)
		code, out, _ := cli(t, "status", "--db", f.path, "--json")
		is.Equal(code, exitOK)
		var st map[string]any
		is.NoErr(json.Unmarshal([]byte(out), &st))
		is.Equal(st["ended_lease_rows"], 1.0)
		ended, _ := st["ended_leases"].([]any)
		is.Equal(len(ended), 1)
		c := ended[0].(map[string]any)
		is.Equal(c["id"], f.claimed.String()) // the dead worker's claim, not the live one
		is.Equal(c["claimed_by"], "dead-worker")
		is.Equal(c["lease_until"], f.t0.Add(10*time.Minute).Format(time.RFC3339Nano))
		is.True(strings.HasPrefix(c["ended_ago"].(string), "50m")) // t0 was an hour ago

		code, out, _ = cli(t, "status", "--db", f.path)
		is.Equal(code, exitOK)
		is.True(strings.Contains(out, "claims:              2 dispatching, 1 with the lease ended"))
		is.True(strings.Contains(out, f.claimed.String()+"  dead-worker")) // the ended lease is listed
		is.True(strings.Contains(out, "turnframe release'"))               // with what to do
		is.True(strings.Contains(out, "marks them outcome_unknown"))       // and what that does
		is.True(!strings.Contains(out, f.live.String()))                   // a live lease is no one's concern
	})
	t.Run("TakesNoClaimAge", func(t *testing.T) {
		is := is.New(t)
		code, _, stderr := cli(t, "status", "--db", f.path, "--claim-age", "5m")
		is.Equal(code, exitUsage)
		is.True(strings.Contains(stderr, "claim-age"))
	})
}

func TestOutbox(t *testing.T) {
	f := mustFixture(t)
	t.Run("ListsEveryRowOldestFirst", func(t *testing.T) {
		is := is.New(t)
		code, out, _ := cli(t, "outbox", "--db", f.path)
		is.Equal(code, exitOK)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		is.Equal(len(lines), 9) // a header and eight rows
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
	// A dispatching row shows when its lease ends, every row its attempt
	// base, and the last code whatever the status.
	t.Run("ShowsLeasesAttemptBaseAndLastCode", func(t *testing.T) {
		is := is.New(t)
		code, out, _ := cli(t, "outbox", "--db", f.path, "--json")
		is.Equal(code, exitOK)
		var rows []map[string]any
		is.NoErr(json.Unmarshal([]byte(out), &rows))
		byID := map[string]map[string]any{}
		for _, r := range rows {
			byID[r["id"].(string)] = r
		}
		is.Equal(byID[f.live.String()]["lease_until"], f.t0.Add(3*time.Hour).Format(time.RFC3339Nano))
		is.Equal(byID[f.claimed.String()]["lease_until"], f.t0.Add(10*time.Minute).Format(time.RFC3339Nano))
		_, leased := byID[f.completed.String()]["lease_until"]
		is.True(!leased)                                          // a settled row holds no lease
		is.Equal(byID[f.completed.String()]["attempt_base"], 0.0) // printed even when zero
		is.Equal(byID[f.unknown.String()]["last_code"], "http.timeout")

		code, out, _ = cli(t, "outbox", "--db", f.path)
		is.Equal(code, exitOK)
		is.True(strings.Contains(out, "ATTEMPTS  BASE  DUE"))
		is.True(strings.Contains(out, "LEASE UNTIL"))
		is.True(strings.Contains(out, stamp(f.t0.Add(3*time.Hour)))) // the live row's lease
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
		is.Equal(len(strings.Split(strings.TrimSpace(out), "\n")), 7) // a header and six turns
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
		is.True(strings.Contains(out, "status:         outcome_unknown"))
		is.True(strings.Contains(out, `payload:        {"cents":100}`))
		is.True(strings.Contains(out, "trace context:  "+fixtureTrace)) // the trace it was enqueued under
		code, out, _ = cli(t, "show", f.failed.String(), "--db", f.path)
		is.Equal(code, exitOK)
		is.True(!strings.Contains(out, "trace context")) // a row without one prints none
		code, out, _ = cli(t, "show", f.unknown.String(), "--db", f.path, "--json")
		is.Equal(code, exitOK)
		var v struct{ Outbox outboxJSON }
		is.NoErr(json.Unmarshal([]byte(out), &v))
		is.Equal(v.Outbox.TraceContext, fixtureTrace) // and in JSON
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
		is.Equal(len(v.Journal), 6)
		is.Equal(len(v.Events), 6)
		is.Equal(len(v.Outbox), 6)
		is.Equal(v.Recovery, "nothing")
	})
	t.Run("ATurnAsText", func(t *testing.T) {
		is := is.New(t)
		code, out, _ := cli(t, "show", "--db", f.path, f.unknownDelivered.String())
		is.Equal(code, exitOK)
		is.True(strings.Contains(out, "recovery:      reconcile_external"))
		is.True(strings.Contains(out, "key-ask-remote  ask-remote  order/1  outcome_unknown"))
	})
	t.Run("ADispatchingRowWithItsLease", func(t *testing.T) {
		is := is.New(t)
		e := &env{stdout: new(strings.Builder), stderr: new(strings.Builder), now: func() time.Time { return f.t0.Add(time.Hour) }}
		code := runEnv(context.Background(), e, []string{"show", "--db", f.path, f.live.String()})
		is.Equal(code, exitOK)
		out := e.stdout.(*strings.Builder).String()
		is.True(strings.Contains(out, "claimed by:   live-worker"))
		is.True(strings.Contains(out, "lease until:  "+stamp(f.t0.Add(3*time.Hour))+" (runs for 2h0m0s)"))
	})
	t.Run("ARequeuedRowWithItsAttemptBudget", func(t *testing.T) {
		is := is.New(t)
		store := openFixture(t, f)
		ctx := context.Background()
		is.NoErr(store.Requeue(ctx, f.failed, 1, f.t0.Add(time.Minute)))
		code, out, _ := cli(t, "show", "--db", f.path, f.failed.String())
		is.Equal(code, exitOK)
		is.True(strings.Contains(out, "attempts:     1 (0 this budget: 1 before it, requeued or put back unsent)"))
		is.True(strings.Contains(out, "last code:    http.400")) // the refusal it was requeued from
	})
	t.Run("AnExecutingEntryWithItsLease", func(t *testing.T) {
		is := is.New(t)
		store := openFixture(t, f)
		ctx := context.Background()
		now := f.t0.Add(30 * time.Minute)
		attempt := turnframe.NewIDGenerator().AttemptID(now)
		_, err := store.Apply(ctx, turnframe.Write{
			Account: fixtureAccount, Turn: f.planned, Now: now,
			Settle: []turnframe.Settlement{{
				Key: "key-pending-one", To: turnframe.JournalExecuting, Lease: time.Hour, Attempt: attempt,
			}},
		})
		is.NoErr(err) // an attempt takes the command
		code, out, _ := cli(t, "show", "--db", f.path, f.planned.String(), "--json")
		is.Equal(code, exitOK)
		var v struct{ Journal []map[string]any }
		is.NoErr(json.Unmarshal([]byte(out), &v))
		is.Equal(v.Journal[0]["status"], "executing")
		is.Equal(v.Journal[0]["lease_until"], now.Add(time.Hour).Format(time.RFC3339Nano))
		code, out, _ = cli(t, "show", "--db", f.path, f.planned.String())
		is.Equal(code, exitOK)
		is.True(strings.Contains(out, "LEASE UNTIL"))
		is.True(strings.Contains(out, "executing  1         "+attempt.String()+"  "+stamp(now.Add(time.Hour)))) // its attempt id, then its lease
	})
	t.Run("AnUnknownIDExits2", func(t *testing.T) {
		is := is.New(t)
		code, _, stderr := cli(t, "show", "--db", f.path, "01J9Z3K8Q5R6S7T8V9W0X1Y2Z3")
		is.Equal(code, exitUsage)
		is.True(strings.Contains(stderr, "no outbox row or turn has the id 01J9Z3K8Q5R6S7T8V9W0X1Y2Z3"))
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

// TestRelease proves issue 11, item 5, and issue 13 for the operator:
// release takes only claims whose lease ended, and marks them
// outcome_unknown (ExpireClaims), never pending, since their send may have
// started; forcing one names it, warns, and goes through ReleaseClaim to
// pending; an age is refused with the reason.
func TestRelease(t *testing.T) {
	cases := []struct {
		name     string
		args     func(f fixture) []string
		code     int
		stdout   []string                             // what stdout says
		stderr   []string                             // what stderr says
		released func(f fixture) []turnframe.OutboxID // back to pending
		expired  func(f fixture) []turnframe.OutboxID // now outcome_unknown
	}{
		{
			name: "OnlyEndedLeasesBecomeOutcomeUnknown",
			args: func(fixture) []string { return []string{"release"} },
			code: exitOK,
			stdout: []string{"marked 1 claim(s) whose lease had ended outcome_unknown", "their send may have started",
				"the app's Recover resolves them", "turnframe settle ID"},
			expired: func(f fixture) []turnframe.OutboxID { return []turnframe.OutboxID{f.claimed} },
		},
		{
			name:    "OnlyEndedLeasesAsJSON",
			args:    func(fixture) []string { return []string{"release", "--json"} },
			code:    exitOK,
			stdout:  []string{`"forced": false`, `"expired": [`, `"released": []`},
			expired: func(f fixture) []turnframe.OutboxID { return []turnframe.OutboxID{f.claimed} },
		},
		{
			name:   "AnAgeIsAUsageErrorThatExplainsLeases",
			args:   func(fixture) []string { return []string{"release", "--older-than", "0s"} },
			code:   exitUsage,
			stderr: []string{"takes no age", "lease", "--force"},
		},
		{
			name:     "ForceReleasesALiveLeaseWithAWarning",
			args:     func(f fixture) []string { return []string{"release", "--force", f.live.String()} },
			code:     exitOK,
			stdout:   []string{"released 1 claim(s), forced, back to pending"},
			stderr:   []string{"warning", "may be sent twice", "claimed by live-worker", "runs for"},
			released: func(f fixture) []turnframe.OutboxID { return []turnframe.OutboxID{f.live} },
		},
		{
			name: "ForceTakesSeveralIDs",
			args: func(f fixture) []string {
				return []string{"release", "--force", f.live.String(), f.claimed.String(), "--json"}
			},
			code:     exitOK,
			stdout:   []string{`"forced": true`},
			released: func(f fixture) []turnframe.OutboxID { return []turnframe.OutboxID{f.live, f.claimed} },
		},
		{
			name:     "ForceReleasesARowNamedTwiceOnce",
			args:     func(f fixture) []string { return []string{"release", "--force", f.live.String(), f.live.String()} },
			code:     exitOK, // the second naming is not a refused release
			stdout:   []string{"released 1 claim(s), forced, back to pending"},
			released: func(f fixture) []turnframe.OutboxID { return []turnframe.OutboxID{f.live} },
		},
		{
			name:   "ForceRefusesARowThatIsNotDispatching",
			args:   func(f fixture) []string { return []string{"release", "--force", f.completed.String()} },
			code:   exitUsage,
			stderr: []string{"refused, nothing changed"},
		},
		{
			name:   "ForceRefusesAnUnknownID",
			args:   func(fixture) []string { return []string{"release", "--force", "01J9Z3K8Q5R6S7T8V9W0X1Y2Z3"} },
			code:   exitUsage,
			stderr: []string{"no outbox row 01J9Z3K8Q5R6S7T8V9W0X1Y2Z3"},
		},
		{
			name:   "ForceNeedsIDs",
			args:   func(fixture) []string { return []string{"release", "--force"} },
			code:   exitUsage,
			stderr: []string{"--force needs the ids"},
		},
		{
			name:   "IDsNeedForce",
			args:   func(f fixture) []string { return []string{"release", f.live.String()} },
			code:   exitUsage,
			stderr: []string{"needs --force"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			f := mustFixture(t)
			code, stdout, stderr := cli(t, append(tc.args(f), "--db", f.path)...)
			is.Equal(code, tc.code)
			for _, want := range tc.stdout {
				is.True(strings.Contains(stdout, want)) // stdout says it
			}
			for _, want := range tc.stderr {
				is.True(strings.Contains(stderr, want)) // stderr says it
			}
			var released, expired []turnframe.OutboxID
			if tc.released != nil {
				released = tc.released(f)
			}
			if tc.expired != nil {
				expired = tc.expired(f)
			}
			store := openFixture(t, f)
			for _, id := range []turnframe.OutboxID{f.claimed, f.live} {
				rec, err := store.GetOutbox(context.Background(), id)
				is.NoErr(err)
				want := turnframe.OutboxDispatching
				switch {
				case slices.Contains(released, id):
					want = turnframe.OutboxPending
				case slices.Contains(expired, id):
					want = turnframe.OutboxOutcomeUnknown
					is.Equal(rec.LastCode, turnframe.CodeLeaseEnded) // why it is unknown
					last := lastRecord(t, store, turnframe.OutboxSubject(fixtureAccount, id))
					is.Equal(last.From, "dispatching")            // the audit trail has the expiry…
					is.Equal(last.To, "outcome_unknown")          //
					is.Equal(last.Actor, turnframe.ActorRecovery) // …as recovery's
				}
				if want != turnframe.OutboxDispatching {
					is.True(strings.Contains(stdout, id.String())) // the id is printed
					is.Equal(rec.Attempts, 1)                      // attempts kept
					is.True(rec.LeaseUntil.IsZero())               // the lease is gone
				}
				is.Equal(rec.Status, want) // released, expired, or left with its worker
			}
		})
	}
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
		is.True(strings.Contains(out, fmt.Sprintf("created, schema version %d", schema.Version)))
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
		is.True(strings.Contains(out, fmt.Sprintf("schema version %d, already current", schema.Version)))
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
		{"settle", "--account", "acme", "key-ask-remote", "failed"},
		{"requeue", f.failed.String()},
		{"release"},
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
		{"history", f.unknown.String()}, {"history", "--account", "acme", "key-ask-remote"},
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
		{"settle", "--account", "acme", "key-1", "completed"},
		{"history", "01J9Z3K8Q5R6S7T8V9W0X1Y2Z3"}, {"history", "--account", "acme", "key-1"},
		{"requeue", "01J9Z3K8Q5R6S7T8V9W0X1Y2Z3"},
		{"release"}, {"release", "--force", "01J9Z3K8Q5R6S7T8V9W0X1Y2Z3"}, {"prune", "--older-than", "1h"},
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

// snapshot returns every file of dir with its size and the SHA-256 of its
// content: two snapshots are equal when no byte changed and no file came or
// went (and a failure prints names and digests, not the file).
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
		out[dir+"/"+e.Name()] = fmt.Sprintf("%d bytes, sha256 %x", len(b), sha256.Sum256(b))
	}
	return out
}

// 'turnframe requeue --attempt N' requeues the row only while it is still
// failed at the N attempts the operator looked at ('turnframe show ID'
// prints them): a row sent again since, or no longer failed, is refused
// (exit 2), unchanged.
func TestRequeueWithAnAttemptRequeuesOnlyWhatWasLookedAt(t *testing.T) {
	f := mustFixture(t)
	status := func(t *testing.T) turnframe.OutboxRecord {
		t.Helper()
		rec, err := openFixture(t, f).GetOutbox(context.Background(), f.failed)
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	t.Run("AnotherAttemptIsRefused", func(t *testing.T) {
		is := is.New(t)
		code, _, stderr := cli(t, "requeue", "--db", f.path, f.failed.String(), "--attempt", "2")
		is.Equal(code, exitUsage) // the row is at attempt 1: sent again since, as far as the operator knows
		is.True(strings.Contains(stderr, "refused, nothing changed"))
		is.True(strings.Contains(stderr, "is at attempt 1, not 2"))
		is.Equal(status(t).Status, turnframe.OutboxFailed) // unchanged
	})
	t.Run("NotANumberIsAUsageError", func(t *testing.T) {
		is := is.New(t)
		code, _, _ := cli(t, "requeue", "--db", f.path, f.failed.String(), "--attempt", "one")
		is.Equal(code, exitUsage)
		is.Equal(status(t).Status, turnframe.OutboxFailed) // unchanged
	})
	t.Run("TheAttemptLookedAtIsRequeued", func(t *testing.T) {
		is := is.New(t)
		code, out, stderr := cli(t, "requeue", "--db", f.path, f.failed.String(), "--attempt", "1")
		is.Equal(stderr, "")
		is.Equal(code, exitOK)
		is.True(strings.Contains(out, "failed (http.400) → pending"))
		is.Equal(status(t).Status, turnframe.OutboxPending)
	})
	t.Run("ARowNoLongerFailedIsRefused", func(t *testing.T) {
		is := is.New(t)
		code, _, stderr := cli(t, "requeue", "--db", f.path, f.failed.String(), "--attempt", "1")
		is.Equal(code, exitUsage) // requeued already: pending
		is.True(strings.Contains(stderr, "refused, nothing changed"))
		is.Equal(status(t).Status, turnframe.OutboxPending)
	})
}
