package turnframe_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// rtAdoptBefore is a store that, before the first write of turn `from`
// settling key to `to`, gives the turn up (unless it was) and lets a new turn's plan adopt
// the command: the user's next message landing between an Execute's read
// of the turn and its write. The new turn is sent on adopted. If end is
// set, it is called after the adoption: the caller hangs up while the
// write is made (Execute writes a known outcome past its caller).
type rtAdoptBefore struct {
	turnframe.Store
	t       *testing.T
	from    turnframe.TurnID
	key     turnframe.IdempotencyKey
	to      turnframe.JournalStatus
	cmd     turnframe.Command
	end     context.CancelFunc
	once    sync.Once
	adopted chan turnframe.TurnID
}

func (s *rtAdoptBefore) Apply(ctx context.Context, w turnframe.Write) (turnframe.Applied, error) {
	if w.Turn == s.from && len(w.Settle) == 1 && w.Settle[0].Key == s.key && w.Settle[0].To == s.to {
		s.once.Do(func() {
			other := turnframe.New(s.Store, rtAfterLeases())
			if m, err := s.Store.TurnPhase(ctx, rtAccount, s.from); err != nil || m.Phase != turnframe.PhaseAbandoned {
				if err := other.Abandon(ctx, rtAccount, s.from, "user.left"); err != nil {
					s.t.Errorf("abandon: %v", err)
				}
			}
			s.adopted <- rtPlanned(s.t, other, rtAccount, s.cmd) // adopts it
			if s.end != nil {
				s.end() // the caller hangs up
			}
		})
	}
	return s.Store.Apply(ctx, w)
}

// An Execute that read its turn before it was abandoned and its command
// adopted by a new turn, and then writes about that command, is refused as
// the conflict it is — the turn was given up, the command is another
// turn's — never as ErrNotFound, which says the turn does not exist (or is
// another tenant's). The local path said so already (localRefused); the
// take of a command and the declaration of its dead attempt did not.
func TestAnExecuteWhoseCommandANewTurnAdoptsMeanwhileIsAConflict(t *testing.T) {
	cmd := rtCmd("k-charge", "card/1", "charge")
	t.Run("TheTake", func(t *testing.T) {
		eachStore(t, func(t *testing.T, store turnframe.Store) {
			is := is.New(t)
			turn := rtPlanned(t, turnframe.New(store), rtAccount, cmd)
			racing := &rtAdoptBefore{Store: store, t: t, from: turn, key: cmd.Key, to: turnframe.JournalExecuting, cmd: cmd, adopted: make(chan turnframe.TurnID, 1)}
			h := rtNewHandler(rtScript)
			_, err := turnframe.New(racing).Execute(context.Background(), rtAccount, turn, h)
			adopter := <-racing.adopted
			is.True(errors.Is(err, turnframe.ErrConflict))                        // the turn was abandoned, its command adopted
			is.True(!errors.Is(err, turnframe.ErrNotFound))                       // the turn and the entry exist
			is.Equal(h.callsOf(cmd.Key), 0)                                       // nothing ran
			is.Equal(rtEntry(t, store, cmd.Key).Turn, adopter)                    // the new turn's
			is.Equal(rtEntry(t, store, cmd.Key).Status, turnframe.JournalPending) // to run there
			is.Equal(rtPhase(t, store, turn), turnframe.PhaseAbandoned)           // the old turn gave up
		})
	})
	t.Run("TheDeclarationOfADeadAttempt", func(t *testing.T) {
		eachStore(t, func(t *testing.T, store turnframe.Store) {
			is := is.New(t)
			turn := rtPlanned(t, turnframe.New(store), rtAccount, cmd)
			// The first attempt dies while its handler runs.
			ctx, crash := context.WithCancel(context.Background())
			started := make(chan struct{})
			quiet := turnframe.WithLogger(slog.New(slog.DiscardHandler)) // its late answer
			_, err := turnframe.New(store, quiet).Execute(ctx, rtAccount, turn, turnframe.HandlerFunc(func(hctx context.Context, _ turnframe.Call) turnframe.Outcome {
				close(started)
				crash()
				<-hctx.Done()
				return turnframe.Unknown("")
			}))
			<-started
			is.True(errors.Is(err, context.Canceled))                               // the process died
			is.Equal(rtEntry(t, store, cmd.Key).Status, turnframe.JournalExecuting) // under its dead attempt

			// After its lease, an Execute of a runtime whose Remote forbids a
			// blind re-run declares it unknown; the turn is given up and
			// the command adopted before the declaration lands.
			racing := &rtAdoptBefore{Store: store, t: t, from: turn, key: cmd.Key, to: turnframe.JournalOutcomeUnknown, cmd: cmd, adopted: make(chan turnframe.TurnID, 1)}
			h := rtNewHandler(rtScript)
			_, err = turnframe.New(racing, rtAfterLeases(), turnframe.WithCommand("charge", turnframe.Remote{})).Execute(context.Background(), rtAccount, turn, h)
			adopter := <-racing.adopted
			is.True(errors.Is(err, turnframe.ErrConflict))                          // the turn was abandoned, its command adopted
			is.True(!errors.Is(err, turnframe.ErrNotFound))                         // the turn and the entry exist
			is.Equal(h.callsOf(cmd.Key), 0)                                         // nothing ran
			is.Equal(rtEntry(t, store, cmd.Key).Turn, adopter)                      // the new turn's
			is.Equal(rtEntry(t, store, cmd.Key).Status, turnframe.JournalExecuting) // its dead attempt, for the new turn to judge
		})
	})
	// A process whose clock is ahead (another host, or a wall step) sees
	// the running attempt's lease ended, gives the turn up and adopts the
	// command while its handler still runs here.
	abandonAndAdopt := func(t *testing.T, store turnframe.Store, turn turnframe.TurnID) turnframe.TurnID {
		t.Helper()
		other := turnframe.New(store, rtAfterLeases())
		if err := other.Abandon(context.Background(), rtAccount, turn, "user.left"); err != nil {
			t.Fatalf("abandon: %v", err)
		}
		return rtPlanned(t, other, rtAccount, cmd)
	}
	t.Run("TheOutcomeOfTheRunningAttempt", func(t *testing.T) {
		eachStore(t, func(t *testing.T, store turnframe.Store) {
			is := is.New(t)
			rt := turnframe.New(store, turnframe.WithLogger(slog.New(slog.DiscardHandler)))
			turn := rtPlanned(t, rt, rtAccount, cmd)
			finish := rtHeld(t, rt, turn, cmd.Key, turnframe.Commit([]turnframe.Event{{Case: "card/1", Type: "charged"}}))
			adopter := abandonAndAdopt(t, store, turn)
			_, err := finish()
			is.True(errors.Is(err, turnframe.ErrConflict))                          // the attempt lost its entry to the adopting turn
			is.True(!errors.Is(err, turnframe.ErrNotFound))                         // the turn and the entry exist
			is.Equal(rtEntry(t, store, cmd.Key).Turn, adopter)                      // the new turn's
			is.Equal(rtEntry(t, store, cmd.Key).Status, turnframe.JournalExecuting) // nothing of the outcome written
		})
	})
	t.Run("TheKeeperOfTheRunningAttempt", func(t *testing.T) {
		eachStore(t, func(t *testing.T, store turnframe.Store) {
			is := is.New(t)
			const lost, retry = "turnframe: a command's attempt lost its entry while its handler runs; the command may run twice",
				"turnframe: a command's lease, near its end, could not be renewed; its keeper tries again at its next look"
			said := make(chan string, 1)
			logger := slog.New(hookHandler{Handler: slog.NewTextHandler(io.Discard, nil), hook: func(msg string) {
				if msg == lost || msg == retry {
					select {
					case said <- msg:
					default:
					}
				}
			}})
			clk := &osClock{}
			rt := turnframe.New(store, turnframe.WithClock(clk.read), turnframe.WithLogger(logger))
			turn := rtPlanned(t, rt, rtAccount, cmd)
			finish := rtHeld(t, rt, turn, cmd.Key, turnframe.Commit(nil))
			abandonAndAdopt(t, store, turn)
			clk.step.Store(int64(2 * time.Hour)) // this process's wall clock catches up: its keeper renews
			var msg string
			select {
			case msg = <-said:
			case <-time.After(10 * time.Second): // a bound for the failure: the keeper looks every second
			}
			_, err := finish()
			is.Equal(msg, lost)                            // the keeper says the command may run twice, and stops
			is.True(errors.Is(err, turnframe.ErrConflict)) // and the outcome is refused as the conflict it is
		})
	})
}

// Recover declares the attempt stranded on an abandoned turn unknown
// before its policy acts; a new turn's plan adopting the command between
// Recover's read and that write is the conflict it is, as Recovery.Settle
// reports the same race, not ErrNotFound for an entry that exists.
func TestARecoverWhoseStrandedCommandANewTurnAdoptsMeanwhileIsAConflict(t *testing.T) {
	cmd := rtCmd("k-charge", "card/1", "charge")
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		quiet := turnframe.WithLogger(slog.New(slog.DiscardHandler))
		turn := rtStranded(t, store, cmd) // the process died and its turn was given up
		racing := &rtAdoptBefore{Store: store, t: t, from: turn, key: cmd.Key, to: turnframe.JournalOutcomeUnknown, cmd: cmd, adopted: make(chan turnframe.TurnID, 1)}
		rec := turnframe.NewRecovery(racing, rtAfterLeases(), quiet, turnframe.WithCommand("charge", turnframe.Remote{}))
		report, err := rec.Recover(context.Background(), turnframe.RecoveryScope{}, &rtResumer{rt: turnframe.New(racing, rtAfterLeases(), quiet), h: rtNewHandler(rtScript)})
		is.NoErr(err) // the pass ran
		adopter := <-racing.adopted
		is.Equal(len(report.Policy), 1)                                         // the stranded attempt was handed to its policy
		is.True(errors.Is(report.Policy[0].Err, turnframe.ErrConflict))         // and found adopted
		is.True(!errors.Is(report.Policy[0].Err, turnframe.ErrNotFound))        // the entry exists
		is.Equal(rtEntry(t, store, cmd.Key).Turn, adopter)                      // the new turn's
		is.Equal(rtEntry(t, store, cmd.Key).Status, turnframe.JournalExecuting) // for it to judge
	})
}

// rtStranded plans a turn of cmd and leaves cmd stranded: its attempt
// Executing, its handler running when the turn was abandoned and the
// process died. It returns the turn.
func rtStranded(t *testing.T, store turnframe.Store, cmd turnframe.Command) turnframe.TurnID {
	t.Helper()
	is := is.New(t)
	ctx, crash := context.WithCancel(context.Background())
	defer crash()
	rt := turnframe.New(store, turnframe.WithLogger(slog.New(slog.DiscardHandler))) // its late answer
	turn := rtPlanned(t, rt, rtAccount, cmd)
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := rt.Execute(ctx, rtAccount, turn, turnframe.HandlerFunc(func(hctx context.Context, _ turnframe.Call) turnframe.Outcome {
			close(started)
			<-hctx.Done()
			return turnframe.Unknown("")
		}))
		done <- err
	}()
	<-started
	is.NoErr(rt.Abandon(context.Background(), rtAccount, turn, "user.left"))
	crash()
	is.True(errors.Is(<-done, context.Canceled)) // stranded: Executing on an abandoned turn
	return turn
}
