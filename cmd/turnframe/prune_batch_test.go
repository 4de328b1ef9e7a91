package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
	"github.com/turnframe/turnframe/storekit"
)

// finishedFile writes a file of n rows, claimed and settled Completed
// before two hours ago, the i-th at finish(i), and returns its path and the
// rows' ids in enqueue order.
func finishedFile(t *testing.T, n int, finish func(i int) time.Time) (string, []turnframe.OutboxID) {
	t.Helper()
	is := is.New(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "app.db")
	s, err := sqlitestore.Open(ctx, path)
	is.NoErr(err) // open a new store
	defer s.Close()
	gen := turnframe.NewIDGenerator()
	t0 := time.Now().UTC().Add(-3 * time.Hour).Truncate(time.Millisecond)
	const per = 100
	for i := 0; i < n; i += per {
		msgs := make([]turnframe.OutboxMessage, min(per, n-i))
		for j := range msgs {
			msgs[j] = turnframe.OutboxMessage{Destination: "d", Payload: []byte(`{}`)}
		}
		turn, attempt := gen.TurnID(t0), gen.AttemptID(t0)
		key := turnframe.IdempotencyKey(fmt.Sprintf("k%d", i))
		_, err := s.Apply(ctx, turnframe.Write{Account: fixtureAccount, Turn: turn, Now: t0,
			Begin:  &turnframe.StoredTurn{Account: fixtureAccount, ID: turn, Conversation: gen.ConversationID(t0), Text: "x"},
			Admit:  []turnframe.Command{{Key: key, Case: "c", Name: "notify"}},
			Settle: []turnframe.Settlement{{Key: key, To: turnframe.JournalExecuting, Attempt: attempt, Lease: time.Minute}},
			Phase:  turnframe.PhaseExecuting})
		is.NoErr(err) // begin a turn
		_, err = s.Apply(ctx, turnframe.Write{Account: fixtureAccount, Turn: turn, Now: t0,
			Settle: []turnframe.Settlement{{Key: key, To: turnframe.JournalCommitted, Attempt: attempt}},
			Outbox: msgs, Phase: turnframe.PhaseCommitted})
		is.NoErr(err) // commit its rows
	}
	claims, err := s.ClaimDue(ctx, t0.Add(time.Second), n, "w", time.Minute)
	is.NoErr(err)            // claim
	is.Equal(len(claims), n) // every row
	sets := make([]turnframe.OutboxSettlement, n)
	ids := make([]turnframe.OutboxID, n)
	for i, c := range claims {
		sets[i] = turnframe.OutboxSettlement{Claim: c, To: turnframe.OutboxCompleted, Now: finish(i)}
		ids[i] = c.ID
	}
	_, err = s.Settle(ctx, sets)
	is.NoErr(err) // settle
	return path, ids
}

// prune deletes in batches, each its own transaction: a run that stops on
// an error says how many rows it deleted first, and a run again deletes the
// rest.
func TestPruneInBatches(t *testing.T) {
	early := time.Now().UTC().Add(-3 * time.Hour)
	late := early.Add(time.Second)
	b := storekit.PruneBatch
	path, ids := finishedFile(t, b+b/2, func(i int) time.Time {
		if i < b {
			return early
		}
		return late
	})

	t.Run("DeletesMoreThanOneBatch", func(t *testing.T) {
		is := is.New(t)
		path, _ := finishedFile(t, 2*b+1, func(int) time.Time { return early })
		code, out, _ := cli(t, "prune", "--db", path, "--older-than", "1h", "--json")
		is.Equal(code, exitOK)
		var v struct{ Deleted int }
		is.NoErr(json.Unmarshal([]byte(out), &v))
		is.Equal(v.Deleted, 2*b+1) // every batch counted
	})
	t.Run("AnErrorAfterABatchSaysHowManyWereDeletedFirst", func(t *testing.T) {
		is := is.New(t)
		// A row of the second batch cannot be read back.
		db, err := sql.Open("sqlite", "file:"+path)
		is.NoErr(err) // open the file
		defer db.Close()
		bad, spoilt := ids[b+1].String(), strings.Repeat("!", 26)
		_, err = db.Exec(`UPDATE outbox SET id = ? WHERE id = ?`, spoilt, bad)
		is.NoErr(err) // spoil a row
		code, _, errOut := cli(t, "prune", "--db", path, "--older-than", "1h")
		is.True(code != exitOK)                                                         // the error is the run's
		is.True(strings.Contains(errOut, fmt.Sprintf("deleted %d finished row(s)", b))) // the first batch, said
		is.True(strings.Contains(errOut, "run it again"))                               // and what to do
		is.True(!strings.Contains(errOut, "nothing was changed"))                       // never denied

		_, err = db.Exec(`UPDATE outbox SET id = ? WHERE id = ?`, bad, spoilt)
		is.NoErr(err) // mend it
		code, out, _ := cli(t, "prune", "--db", path, "--older-than", "1h")
		is.Equal(code, exitOK)
		is.True(strings.Contains(out, fmt.Sprintf("deleted %d finished row(s)", b/2))) // the rest
	})
	t.Run("AsJSONAStoppedRunStillSaysHowManyItDeleted", func(t *testing.T) {
		is := is.New(t)
		path, ids := finishedFile(t, b+b/2, func(int) time.Time { return early })
		db, err := sql.Open("sqlite", "file:"+path)
		is.NoErr(err) // open the file
		defer db.Close()
		_, err = db.Exec(`UPDATE outbox SET id = ? WHERE id = ?`, strings.Repeat("!", 26), ids[b+1].String())
		is.NoErr(err) // spoil a row of the second batch
		code, out, _ := cli(t, "prune", "--db", path, "--older-than", "1h", "--json")
		is.True(code != exitOK) // the exit status says it stopped
		var v struct {
			Deleted int
			Stopped string
		}
		is.NoErr(json.Unmarshal([]byte(out), &v))            // stdout is JSON all the same
		is.Equal(v.Deleted, b)                               // the first batch, counted
		is.True(strings.Contains(v.Stopped, "run it again")) // and why it stopped
	})
}
