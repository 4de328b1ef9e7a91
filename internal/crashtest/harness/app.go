package harness

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/turnframe/turnframe"
)

// The application's own rows (issue 14 point 1): every commit a handler
// makes also inserts a row into a table of the application's, created by the
// children in the same database, through Outcome.With. The audit then holds the
// table to the journal: one row for each command a handler committed, under
// the attempt that committed it, and none for anything else — a commit
// refused, or cut short by a kill, left none. With the faults on, the app's
// writes of some commits fail after inserting their row (errAppFault): the
// commit must leave nothing, its row included, and the command is resumed
// later as after a crash.

// appErrorPercent is how often, in percent, the app's writes of a local
// command's first attempt fail, when the faults are on (appFails).
const appErrorPercent = 10

// errAppFault is the error of the app's writes that fail on purpose.
var errAppFault = errors.New("crashtest: the app's writes failed (fault)")

// appFails reports whether the app's writes of call fail on purpose after
// inserting their row: for a drawn share of local commands, but the last
// of their turn (fault (a) fires on that one and expects its settlement to
// land), once per command and process — a local command's failed run is
// not counted as an attempt, so call.Attempts cannot tell the first run
// from the next.
func (c *child) appFails(call turnframe.Call) bool {
	if !c.faults || call.Attempts > 1 || isLast(call.Command.Key) ||
		!slices.Contains(localKinds, call.Command.Name) || draw(c.seed, "app_error", call.Command.Key) >= appErrorPercent {
		return false
	}
	k := entryKey{call.Account, call.Command.Key}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.appFaulted[k] {
		return false
	}
	c.appFaulted[k] = true
	return true
}

// withAppRow is c.handle, each of its commits also inserting the app's row
// (and failing after it, when appFails).
func (c *child) withAppRow(ctx context.Context, call turnframe.Call) turnframe.Outcome {
	out := c.handle(ctx, call)
	if out.Kind() != turnframe.OutcomeCommit {
		return out
	}
	fail := c.appFails(call)
	return out.With(func(ctx context.Context, tx turnframe.Tx) error {
		err := c.backend.InsertAppRow(ctx, tx, AppRow{Account: string(call.Account), Key: string(call.Command.Key), Attempt: call.Attempt.String(), Worker: c.worker})
		if err == nil && fail {
			err = errAppFault
		}
		return err
	})
}

// auditAppRows compares the app's rows with the commands a handler
// committed (f.handlerCommits, by account and key: the committing
// attempt): a row for none of them, or under another attempt, or a second
// row, is counted in appRowsExtra; a commit without its row in
// appRowsMissing.
func (f *figures) auditAppRows(t *testing.T, b Backend, store turnframe.Store) {
	t.Helper()
	seen := map[string]bool{}
	err := b.Query(context.Background(), store, `SELECT account, key, attempt, worker FROM app_commits ORDER BY id`, func(scan func(...any) error) error {
		var account, key, attempt, worker string
		if err := scan(&account, &key, &attempt, &worker); err != nil {
			return err
		}
		f.appRows++
		k := account + "\x00" + key
		want, committed := f.handlerCommits[k]
		if !committed || want != attempt || seen[k] {
			f.appRowsExtra++
			t.Logf("app row %s/%s by attempt %s of %s: committed by the handler of attempt %q (%t), a row seen already: %t",
				account, key, attempt, worker, want, committed, seen[k])
		}
		seen[k] = true
		return nil
	})
	if err != nil {
		t.Fatalf("read the app table: %v", err)
	}
	for k := range f.handlerCommits {
		if !seen[k] {
			f.appRowsMissing++
			t.Logf("no app row for the commit of %q", k)
		}
	}
}
