package main

import (
	"context"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

// 'turnframe turns --unfinished' prints, per turn, the kind of action
// recovery would take (Recovery.Triage): for a committed turn never
// delivered — what a crash leaves, to be answered again — it reads none of
// the events the answer would be built from. With 1 MiB events, what it
// allocates does not grow with their number: it once read every event,
// data and all, to print one word.
func TestTurnsUnfinishedReadsNoEventData(t *testing.T) {
	ctx := context.Background()
	var got []uint64
	for _, events := range []int{10, 30} {
		is := is.New(t)
		path := filepath.Join(t.TempDir(), "app.db")
		store, err := sqlitestore.Open(ctx, path)
		is.NoErr(err)
		t0 := time.Now().UTC().Add(-time.Hour).Truncate(time.Millisecond)
		ids := turnframe.NewIDGenerator()
		turn, attempt := ids.TurnID(t0), ids.AttemptID(t0)
		_, err = store.Apply(ctx, turnframe.Write{Account: "acme", Turn: turn, Now: t0,
			Begin:  &turnframe.StoredTurn{Account: "acme", ID: turn, Conversation: ids.ConversationID(t0), Text: "import"},
			Admit:  []turnframe.Command{{Key: "k1", Case: "case/1", Name: "import"}},
			Settle: []turnframe.Settlement{{Key: "k1", To: turnframe.JournalExecuting, Attempt: attempt, Lease: time.Hour}},
			Phase:  turnframe.PhaseExecuting})
		is.NoErr(err)
		data := []byte(`"` + strings.Repeat("x", 1<<20-2) + `"`)
		evs := make([]turnframe.Event, events)
		for i := range evs {
			evs[i] = turnframe.Event{Case: "case/1", Type: "imported", Data: data}
		}
		_, err = store.Apply(ctx, turnframe.Write{Account: "acme", Turn: turn, Now: t0,
			Settle: []turnframe.Settlement{{Key: "k1", To: turnframe.JournalCommitted, Attempt: attempt}},
			Events: evs, Phase: turnframe.PhaseCommitted})
		is.NoErr(err)
		is.NoErr(store.Close())

		runtime.GC()
		var a, b runtime.MemStats
		runtime.ReadMemStats(&a)
		code, stdout, stderr := cli(t, "turns", "--db", path, "--unfinished")
		runtime.ReadMemStats(&b)
		is.Equal(code, 0)
		is.Equal(stderr, "")
		is.True(strings.Contains(stdout, turn.String()+" "))
		is.True(strings.Contains(stdout, "regenerate_response")) // the decision, as before
		alloc := b.TotalAlloc - a.TotalAlloc
		t.Logf("one unfinished turn with %d events of 1 MiB: 'turns --unfinished' allocated %d KiB", events, alloc>>10)
		got = append(got, alloc)
	}
	is := is.New(t)
	is.True(got[1] < got[0]+4<<20) // 20 MiB more of events: not 20 MiB more read
	is.True(got[1] < 8<<20)        // one line for one turn: not the 30 MiB of its events
}
