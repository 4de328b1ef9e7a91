package main

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

// fullDisk is a stdout that takes nothing: a redirect onto a full disk
// (/dev/full), a pipe whose reader went away.
type fullDisk struct{}

func (fullDisk) Write([]byte) (int, error) { return 0, errors.New("no space left on device") }

// A listing whose output could not be written failed: exit 1, never 0 with
// nothing written ('turnframe approvals > list.txt' on a full disk left an
// empty file and said done when nothing awaited approval).
func TestAListingWhoseOutputCannotBeWrittenFails(t *testing.T) {
	f := mustFixture(t)
	for _, args := range [][]string{{"approvals"}, {"status"}, {"outbox"}, {"turns"}, {"history", f.unknown.String()}} {
		t.Run(args[0], func(t *testing.T) {
			is := is.New(t)
			var stderr bytes.Buffer
			code := run(context.Background(), append(args, "--db", f.path), fullDisk{}, &stderr)
			t.Log(stderr.String())
			is.Equal(code, exitFailure) // not done
		})
	}
}

// A command that changed the database and then could not write its
// confirmation (stdout on a full disk, a pipe whose reader went away) says
// the change was made and exits exitUnreported: neither 0, which hid that
// nothing was written, nor 1, "could not be done now", which a script takes
// for a change not made and runs again. Every command that writes printed
// its line without looking at the write's error and exited 0.
func TestAWriteWhoseConfirmationCannotBeWrittenSaysItWasDone(t *testing.T) {
	ctx := context.Background()
	outbox := func(id func(fixture) turnframe.OutboxID, want turnframe.OutboxStatus) func(*testing.T, fixture) {
		return func(t *testing.T, f fixture) {
			rec, err := openFixture(t, f).GetOutbox(ctx, id(f))
			if err != nil || rec.Status != want {
				t.Errorf("outbox row: %v, %v; want %v", rec.Status, err, want)
			}
		}
	}
	entry := func(account turnframe.AccountID, key turnframe.IdempotencyKey, want turnframe.JournalStatus) func(*testing.T, fixture) {
		return func(t *testing.T, f fixture) {
			j, err := openFixture(t, f).ByKey(ctx, account, key)
			if err != nil || j.Status != want {
				t.Errorf("journal entry %s: %v, %v; want %v", key, j.Status, err, want)
			}
		}
	}
	pruned := func(t *testing.T, f fixture) {
		if _, err := openFixture(t, f).GetOutbox(ctx, f.completed); !errors.Is(err, turnframe.ErrNotFound) {
			t.Errorf("the completed row is still there: %v", err)
		}
	}
	approvals := func(t *testing.T) fixture {
		path, _ := approvalFixture(t)
		return fixture{path: path}
	}
	newFile := func(t *testing.T) fixture { return fixture{path: filepath.Join(t.TempDir(), "new.db")} }
	migrated := func(t *testing.T, f fixture) {
		if _, err := sqlitestore.Open(ctx, f.path, sqlitestore.WithExisting()); err != nil {
			t.Errorf("the file was not migrated: %v", err)
		}
	}
	id := func(s string) []string { return []string{s} }
	for _, c := range []struct {
		name  string
		make  func(*testing.T) fixture
		args  func(fixture) []string
		check func(*testing.T, fixture)
	}{
		{"settle", mustFixture, func(f fixture) []string { return []string{"settle", f.unknown.String(), "completed"} },
			outbox(func(f fixture) turnframe.OutboxID { return f.unknown }, turnframe.OutboxCompleted)},
		{"settle --account", mustFixture, func(fixture) []string { return []string{"settle", "--account", "acme", "key-ask-remote", "completed"} },
			entry("acme", "key-ask-remote", turnframe.JournalCommitted)},
		{"requeue", mustFixture, func(f fixture) []string { return []string{"requeue", f.failed.String()} },
			outbox(func(f fixture) turnframe.OutboxID { return f.failed }, turnframe.OutboxPending)},
		{"release", mustFixture, func(fixture) []string { return id("release") },
			outbox(func(f fixture) turnframe.OutboxID { return f.claimed }, turnframe.OutboxOutcomeUnknown)},
		{"release --json", mustFixture, func(fixture) []string { return []string{"release", "--json"} },
			outbox(func(f fixture) turnframe.OutboxID { return f.claimed }, turnframe.OutboxOutcomeUnknown)},
		{"release --force", mustFixture, func(f fixture) []string { return []string{"release", "--force", f.claimed.String()} },
			outbox(func(f fixture) turnframe.OutboxID { return f.claimed }, turnframe.OutboxPending)},
		{"prune", mustFixture, func(fixture) []string { return []string{"prune", "--older-than", "0s"} }, pruned},
		{"prune --json", mustFixture, func(fixture) []string { return []string{"prune", "--older-than", "0s", "--json"} }, pruned},
		{"approve", approvals, func(fixture) []string { return []string{"approve", "--account", "acme", "pay-1"} },
			entry("acme", "pay-1", turnframe.JournalPending)},
		{"deny", approvals, func(fixture) []string { return []string{"deny", "--account", "acme", "pay-1"} },
			entry("acme", "pay-1", turnframe.JournalRejected)},
		{"migrate", newFile, func(fixture) []string { return id("migrate") }, migrated},
	} {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			f := c.make(t)
			var stderr bytes.Buffer
			code := run(ctx, append(c.args(f), "--db", f.path), fullDisk{}, &stderr)
			t.Log(stderr.String())
			is.Equal(code, exitUnreported)                                     // done, unreported
			is.True(strings.Contains(stderr.String(), "the change was made"))  // says it was done
			is.True(!strings.Contains(stderr.String(), "nothing was changed")) // never that it was not
			c.check(t, f)
		})
	}
}

// A write that failed on part of what it was asked, whose confirmation of
// the rest could not be written either, exits as its failure calls for,
// and says both.
func TestAPartWriteWhoseConfirmationCannotBeWrittenExitsAsItsFailure(t *testing.T) {
	is := is.New(t)
	f := mustFixture(t)
	var stderr bytes.Buffer
	code := run(context.Background(), []string{"release", "--db", f.path, "--force", f.claimed.String(), f.completed.String()}, fullDisk{}, &stderr)
	t.Log(stderr.String())
	is.Equal(code, exitUsage)                                                        // the completed row was refused
	is.True(strings.Contains(stderr.String(), "is completed"))                       // why
	is.True(strings.Contains(stderr.String(), "what was done could not be written")) // and that its report was lost
	rec, err := openFixture(t, f).GetOutbox(context.Background(), f.claimed)
	is.NoErr(err)
	is.Equal(rec.Status, turnframe.OutboxPending) // the claimed row was released
}

// Help asked for and not written is not shown: exit 1, as for a listing.
func TestHelpThatCannotBeWrittenFails(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"help", "settle"}, {"settle", "-h"}, {"--help"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			is := is.New(t)
			var stderr bytes.Buffer
			code := run(context.Background(), args, fullDisk{}, &stderr)
			t.Log(stderr.String())
			is.Equal(code, exitFailure)                                           // not shown
			is.True(strings.Contains(stderr.String(), "no space left on device")) // says why
		})
	}
}
