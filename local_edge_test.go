package turnframe_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// Edges of local commands (WithLocalCommand) where they meet approvals,
// abandonment and adoption, a reconciliation racing Execute, and other
// Executes of the same turn. Each was found failing by an outside attack on
// the code (the first three) and is kept as its regression test.

// A local command commits while an entry before it, awaiting approval when
// Execute read the turn, is approved. The settlement asks for Advance:
// Committed (it was the last pending entry when read), which the approved
// entry now forbids. No take moved the turn to Executing before the
// handler ran, so the settlement itself must: a turn one of whose commands
// committed admits no second plan. Undeclared (a take first) is the
// reference.
func TestALocalCommitMovesAPlannedTurnOnWhenItCannotCommitIt(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []turnframe.Option
	}{
		{"undeclared", nil},
		{"local", []turnframe.Option{turnframe.WithLocalCommand("book")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				ctx := context.Background()
				rt := turnframe.New(store, tc.opts...)
				gated := rtCmd("k-pay", "flight/1", "bump")
				gated.NeedsApproval = true
				turn := rtPlanned(t, rt, rtAccount, gated, rtCmd("k-book", "flight/7", "book"))

				finish := rtHeld(t, rt, turn, "k-book",
					turnframe.Commit([]turnframe.Event{{Case: "flight/7", Type: "booked"}}))
				_, err := rt.Approve(ctx, rtAccount, "k-pay", turnframe.ActorApp, "ok") // approved while k-book's handler runs
				is.NoErr(err)
				report, err := finish()
				is.NoErr(err)
				is.Equal(report.Results[1].Kind, turnframe.ResultCommitted) // k-book committed

				phase := rtPhase(t, store, turn)
				_, planErr := rt.Plan(ctx, rtAccount, turn, turnframe.Plan{Commands: []turnframe.Command{rtCmd("k-late", "flight/9", "bump")}})
				t.Logf("phase after a committed command: %v (report says %v); a second Plan: %v", phase, report.Phase, planErr)
				is.True(phase >= turnframe.PhaseExecuting)         // a command of the turn ran and committed
				is.True(errors.Is(planErr, turnframe.ErrConflict)) // a turn whose commands ran admits no new plan
			})
		})
	}
}

// A turn abandoned while its local command's handler ran, whose command a
// new turn adopted at once (a Pending entry is adoptable at once, unlike an
// Executing one under a live lease): the old turn's settlement names an
// entry that is no longer its own. Execute reports it as the conflict it
// is (ErrConflict, as for any abandoned turn), never as ErrNotFound, and
// writes nothing.
func TestALocalCommandAdoptedByANewTurnWhileItRanIsAConflict(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		rt := turnframe.New(store, turnframe.WithLocalCommand("book"), turnframe.WithLogger(slog.New(slog.DiscardHandler)))
		first := rtPlanned(t, rt, rtAccount, rtCmd("k-book", "flight/7", "book"))
		finish := rtHeld(t, rt, first, "k-book", turnframe.Commit([]turnframe.Event{{Case: "flight/7", Type: "booked"}}))
		is.NoErr(rt.Abandon(ctx, rtAccount, first, "user_left"))
		second := rtPlanned(t, rt, rtAccount, rtCmd("k-book", "flight/7", "book")) // adopts k-book
		is.Equal(rtEntry(t, store, "k-book").Turn, second)

		_, err := finish()
		t.Logf("error: %v", err)
		is.True(err != nil)
		is.True(!errors.Is(err, turnframe.ErrNotFound))                  // the turn and the entry both exist
		is.True(errors.Is(err, turnframe.ErrConflict))                   // Execute: ErrConflict for an abandoned turn
		is.Equal(len(rtEventsByKey(t, store, rtAccount, "flight/7")), 0) // nothing written (holds)
	})
}

// rtResendOnDeclare is a Store that, when Execute declares key's dead
// attempt unknown, first lets a concurrent reconciliation get there: the
// same declaration (as a Recover would make it) and then a resend (an
// operator's or the policy's), so that Execute's own declaration is
// refused with the entry Pending again.
type rtResendOnDeclare struct {
	turnframe.Store
	key   turnframe.IdempotencyKey
	once  sync.Once
	fired chan struct{}
}

func (s *rtResendOnDeclare) Apply(ctx context.Context, w turnframe.Write) (turnframe.Applied, error) {
	if len(w.Settle) == 1 && w.Settle[0].Key == s.key && w.Settle[0].Code == turnframe.CodeLeaseEnded {
		s.once.Do(func() {
			if _, err := s.Store.Apply(ctx, w); err != nil { // recovery declared it first
				panic(err)
			}
			e, err := s.Store.ByKey(ctx, w.Account, s.key)
			if err != nil {
				panic(err)
			}
			if _, err := s.Store.Apply(ctx, turnframe.Write{Account: w.Account, Turn: w.Turn, Now: w.Now, Actor: turnframe.ActorOperator,
				Settle: []turnframe.Settlement{{Key: s.key, To: turnframe.JournalPending, Prior: e.Attempt}}}); err != nil {
				panic(err) // and a person sent it again
			}
			close(s.fired)
		})
	}
	return s.Store.Apply(ctx, w)
}

// Execute meets an attempt that died, of a command whose Remote forbids a
// blind rerun, and declares it unknown; a reconciliation got there first and
// put the entry back to Pending (a resend). The refused declaration leaves a
// Pending entry before the turn's next command: Execute stops there, and the
// later command does not run ahead of it.
func TestARefusedDeclarationOfAPendingEntryStopsExecute(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		clock := newStepClock(time.Now().UTC().Truncate(time.Microsecond))
		opts := []turnframe.Option{turnframe.WithClock(clock.read), turnframe.WithLocalCommand("bump"),
			turnframe.WithCommand("charge", turnframe.Remote{}), turnframe.WithLogger(slog.New(slog.DiscardHandler))}
		rt := turnframe.New(store, opts...)
		turn := rtPlanned(t, rt, rtAccount, rtCmd("k-charge", "card/1", "charge"), rtCmd("k-bump", "flight/8", "bump"))
		gen := turnframe.NewIDGenerator()
		_, err := store.Apply(ctx, turnframe.Write{Account: rtAccount, Turn: turn, Now: clock.read(),
			Settle: []turnframe.Settlement{{Key: "k-charge", To: turnframe.JournalExecuting, Attempt: gen.AttemptID(clock.read()), Lease: time.Minute}}})
		is.NoErr(err) // an attempt took k-charge and died
		clock.set(clock.read().Add(2 * time.Minute))

		racing := &rtResendOnDeclare{Store: store, key: "k-charge", fired: make(chan struct{})}
		h := rtNewHandler(rtScript)
		report, err := turnframe.New(racing, opts...).Execute(ctx, rtAccount, turn, h)
		<-racing.fired
		t.Logf("err=%v kinds=%v k-charge=%v k-bump=%v", err, rtKinds(report),
			rtEntry(t, store, "k-charge").Status, rtEntry(t, store, "k-bump").Status)
		is.Equal(rtEntry(t, store, "k-charge").Status, turnframe.JournalPending) // the earlier command is pending again
		is.Equal(h.callsOf("k-bump"), 0)                                         // so the later one must not run ahead of it
		is.Equal(rtEntry(t, store, "k-bump").Status, turnframe.JournalPending)
	})
}

// Several Executes of one turn at once, two declaring its commands local
// and two not, released together: every command commits once, with one
// event and its outbox rows once, and no handler of a later command is
// called while an earlier one is unsettled.
func TestExecutesOfLocalAndTakenCommandsAtOnceCommitEachOnce(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		rt := turnframe.New(store, turnframe.WithLocalCommand("book", "notify"))
		remote := turnframe.New(store) // an older process: nothing declared local
		for round := range 8 {
			keys := []turnframe.IdempotencyKey{
				turnframe.IdempotencyKey("a" + string(rune('0'+round))),
				turnframe.IdempotencyKey("b" + string(rune('0'+round))),
				turnframe.IdempotencyKey("c" + string(rune('0'+round))),
			}
			turn := rtPlanned(t, rt, rtAccount, rtCmd(keys[0], "flight/7", "book"), rtCmd(keys[1], "flight/7", "bump"), rtCmd(keys[2], "flight/7", "notify"))
			var mu sync.Mutex
			var outOfOrder []string
			h := turnframe.HandlerFunc(func(ctx context.Context, call turnframe.Call) turnframe.Outcome {
				for i, k := range keys {
					if k != call.Command.Key {
						continue
					}
					for _, earlier := range keys[:i] {
						e, err := store.ByKey(ctx, rtAccount, earlier)
						if err == nil && !e.Status.IsSettled() {
							mu.Lock()
							outOfOrder = append(outOfOrder, string(k)+" while "+string(earlier)+" is "+e.Status.String())
							mu.Unlock()
						}
					}
				}
				return rtScript(ctx, call, 1)
			})
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range 4 {
				r := rt
				if i%2 == 1 {
					r = remote
				}
				wg.Go(func() {
					<-start
					r.Execute(ctx, rtAccount, turn, h) // in-flight or conflict answers are fine
				})
			}
			close(start)
			wg.Wait()
			_, err := rt.Execute(ctx, rtAccount, turn, h) // finish whatever stopped in flight
			is.NoErr(err)
			is.Equal(outOfOrder, []string(nil))
			byKey := rtEventsByKey(t, store, rtAccount, "flight/7")
			for _, k := range keys {
				is.Equal(rtEntry(t, store, k).Status, turnframe.JournalCommitted)
				is.Equal(byKey[k], 1) // one event per command
			}
		}
		rows := rtOutboxKeys(t, store, rtAccount)
		is.Equal(len(rows), 8*3) // book: 1 row, notify: 2 rows, per round
	})
}
