package turnframe_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// Execute writes a known outcome even after its caller's context ended
// (record: "even after ctx ended"), and a refusal of that write because a
// new turn adopted the command is the conflict it is. The read that tells
// adoption from a missing turn must outlive the caller as the write did:
// read on the ended context it fails, and the refusal was reported as
// ErrNotFound — a turn that does not exist, or another tenant's — for a
// turn and an entry that both exist.
func TestAnOutcomeRefusedAsAdoptedAfterTheCallerLeftIsAConflict(t *testing.T) {
	cmd := rtCmd("k-bump", "card/1", "bump") // commits
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		quiet := turnframe.WithLogger(slog.New(slog.DiscardHandler))
		turn := rtPlanned(t, turnframe.New(store, quiet), rtAccount, cmd)
		ctx, end := context.WithCancel(context.Background())
		defer end()
		racing := &rtAdoptBefore{Store: store, t: t, from: turn, key: cmd.Key, to: turnframe.JournalCommitted, cmd: cmd,
			end: end, adopted: make(chan turnframe.TurnID, 1)}
		h := rtNewHandler(rtScript)
		_, err := turnframe.New(racing, quiet).Execute(ctx, rtAccount, turn, h)
		var adopter turnframe.TurnID
		select {
		case adopter = <-racing.adopted:
		default:
			t.Fatalf("the outcome was never written: %v", err)
		}
		t.Logf("Execute: %v", err)
		is.Equal(h.callsOf(cmd.Key), 1)                                         // the handler ran, and committed
		is.Equal(rtEntry(t, store, cmd.Key).Turn, adopter)                      // the new turn's
		is.Equal(rtEntry(t, store, cmd.Key).Status, turnframe.JournalExecuting) // nothing of the outcome written
		is.True(!errors.Is(err, turnframe.ErrNotFound))                         // the turn and the entry exist
		is.True(errors.Is(err, turnframe.ErrConflict))                          // the command was adopted
	})
}

// A commit whose write is refused because a new turn adopted the command
// is an outcome the handler produced (its effect happened) and nobody
// writes: the new turn runs the command again once the lease ends. It is
// logged as any other outcome that could not be recorded, as it was when
// the refusal surfaced as ErrNotFound and as a Reject's still is; the
// commit's conflict path (rerunnable, for a case that moved) must not
// swallow it.
func TestACommitRefusedAsAdoptedIsLoggedAsUnrecorded(t *testing.T) {
	const unrecorded = "turnframe: command outcome could not be recorded"
	cmd := rtCmd("k-bump", "card/1", "bump")
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		var mu sync.Mutex
		var said []string
		logger := slog.New(hookHandler{Handler: slog.NewTextHandler(io.Discard, nil), hook: func(msg string) {
			mu.Lock()
			defer mu.Unlock()
			said = append(said, msg)
		}})
		rt := turnframe.New(store, turnframe.WithLogger(logger))
		turn := rtPlanned(t, rt, rtAccount, cmd)
		finish := rtHeld(t, rt, turn, cmd.Key, turnframe.Commit([]turnframe.Event{{Case: "card/1", Type: "bumped"}}))
		other := turnframe.New(store, rtAfterLeases())
		is.NoErr(other.Abandon(context.Background(), rtAccount, turn, "user.left"))
		rtPlanned(t, other, rtAccount, cmd) // adopts it while the handler runs
		_, err := finish()
		is.True(errors.Is(err, turnframe.ErrConflict)) // the attempt lost its entry to the adopting turn
		mu.Lock()
		defer mu.Unlock()
		is.True(slices.Contains(said, unrecorded)) // the dropped commit is logged
	})
}
