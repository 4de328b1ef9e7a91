package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

// turnWithRows writes a turn whose commands committed commands × perCommand
// outbox rows, and returns its id and the rows' ids in enqueue order.
func turnWithRows(t *testing.T, path string, commands, perCommand int) (turnframe.TurnID, []string) {
	t.Helper()
	is := is.New(t)
	ctx := context.Background()
	store, err := sqlitestore.Open(ctx, path)
	is.NoErr(err)
	defer store.Close()
	t0 := time.Now().UTC().Add(-time.Hour).Truncate(time.Millisecond)
	ids := turnframe.NewIDGenerator()
	turn := ids.TurnID(t0)
	var admit []turnframe.Command
	var take []turnframe.Settlement
	attempts := make([]turnframe.AttemptID, commands)
	for i := range commands {
		key := turnframe.IdempotencyKey(fmt.Sprintf("k%d", i))
		attempts[i] = ids.AttemptID(t0)
		admit = append(admit, turnframe.Command{Key: key, Case: "case/1", Name: "notify"})
		take = append(take, turnframe.Settlement{Key: key, To: turnframe.JournalExecuting, Attempt: attempts[i], Lease: time.Hour})
	}
	_, err = store.Apply(ctx, turnframe.Write{Account: "acme", Turn: turn, Now: t0,
		Begin: &turnframe.StoredTurn{Account: "acme", ID: turn, Conversation: ids.ConversationID(t0), Text: "tell everyone"},
		Admit: admit, Settle: take, Phase: turnframe.PhaseExecuting})
	is.NoErr(err)
	msgs := make([]turnframe.OutboxMessage, perCommand)
	for i := range msgs {
		msgs[i] = turnframe.OutboxMessage{Destination: "mail", Payload: []byte(fmt.Sprintf(`{"n":%d}`, i))}
	}
	var rows []string
	for i := range commands {
		applied, err := store.Apply(ctx, turnframe.Write{Account: "acme", Turn: turn, Now: t0,
			Settle: []turnframe.Settlement{{Key: admit[i].Key, To: turnframe.JournalCommitted, Attempt: attempts[i]}},
			Outbox: msgs, Advance: turnframe.PhaseCommitted})
		is.NoErr(err)
		for _, r := range applied.Outbox {
			rows = append(rows, r.ID.String())
		}
	}
	return turn, rows
}

var showMoreLine = regexp.MustCompile(`^more: .*'turnframe show (\S+) --after (\S+)'`)

// 'turnframe show TURN' lists the turn's outbox rows as the listings do: at
// most --limit (100 by default), and, when rows remain, a "more:" line on
// stderr whose --after reads on; following it shows every row once, in
// enqueue order. It once stopped at 10,000 rows without a word.
func TestShowListsATurnsRowsUpToItsLimitAndSaysWhereToReadOn(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.db")
	turn, want := turnWithRows(t, path, 3, 100)

	t.Run("JSONPagesThroughEveryRowOnce", func(t *testing.T) {
		is := is.New(t)
		var got []string
		args := []string{"show", "--db", path, "--json", turn.String()}
		for pages := 0; ; pages++ {
			is.True(pages < 4) // three pages of 100, then no more
			code, stdout, stderr := cli(t, args...)
			is.Equal(code, 0)
			var shown struct {
				ID     string `json:"id"`
				Outbox []struct {
					ID      string `json:"id"`
					Payload string `json:"payload"`
				} `json:"outbox"`
				History []json.RawMessage `json:"history"`
			}
			is.NoErr(json.Unmarshal([]byte(stdout), &shown)) // one JSON object
			is.Equal(shown.ID, turn.String())
			is.True(len(shown.Outbox) <= 100) // --limit's default
			for _, r := range shown.Outbox {
				got = append(got, r.ID)
				is.True(strings.HasPrefix(r.Payload, `{"n":`)) // each row whole, payload and all
			}
			if stderr == "" {
				break
			}
			m := showMoreLine.FindStringSubmatch(stderr)
			is.True(m != nil) // a "more:" line, as the listings print it
			is.Equal(m[1], turn.String())
			is.Equal(m[2], got[len(got)-1]) // it reads on after the last row shown
			args = []string{"show", "--db", path, "--json", "--after", m[2], turn.String()}
		}
		is.Equal(got, want) // every row of the turn, once, in enqueue order
	})
	t.Run("TextSaysWhenCutAndTheLimitIsTheOperators", func(t *testing.T) {
		is := is.New(t)
		code, stdout, stderr := cli(t, "show", "--db", path, "--limit", "250", turn.String())
		is.Equal(code, 0)
		is.Equal(strings.Count(stdout, " mail "), 250) // 250 rows of the 300
		m := showMoreLine.FindStringSubmatch(stderr)
		is.True(m != nil) // the cut is said
		is.Equal(m[2], want[249])

		code, stdout, stderr = cli(t, "show", "--db", path, "--limit", "300", turn.String())
		is.Equal(code, 0)
		is.Equal(strings.Count(stdout, " mail "), 300) // every row
		is.Equal(stderr, "")                           // none left: no "more:" line
	})
	t.Run("ABadLimitOrCursorIsAUsageError", func(t *testing.T) {
		is := is.New(t)
		code, _, _ := cli(t, "show", "--db", path, "--limit", "10001", turn.String())
		is.Equal(code, exitUsage)
		code, _, _ = cli(t, "show", "--db", path, "--after", "nope", turn.String())
		is.Equal(code, exitUsage)
	})
}
