package turnframe_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/turnframe/turnframe"
)

// runSeen is a RecoveryHandler that notes the account of every turn it is
// handed, leaves each turn as it is, and calls then, if set, after noting.
type runSeen struct {
	mu       sync.Mutex
	accounts []turnframe.AccountID
	then     func()
}

func (s *runSeen) saw(m turnframe.TurnPhaseMarker) error {
	s.mu.Lock()
	s.accounts = append(s.accounts, m.Account)
	s.mu.Unlock()
	if s.then != nil {
		s.then()
	}
	return nil
}

func (s *runSeen) seen() []turnframe.AccountID {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]turnframe.AccountID(nil), s.accounts...)
}

func (s *runSeen) RestartInterpretation(_ context.Context, m turnframe.TurnPhaseMarker, _ turnframe.RecoveryAction) error {
	return s.saw(m)
}

func (s *runSeen) ResumeCommands(_ context.Context, m turnframe.TurnPhaseMarker, _ turnframe.RecoveryAction) error {
	return s.saw(m)
}

func (s *runSeen) RegenerateResponse(_ context.Context, m turnframe.TurnPhaseMarker, _ turnframe.RecoveryAction) error {
	return s.saw(m)
}

// Recovery.Run: a pass that finds the store closed is reported, and only
// then does Run return its error.
func TestARecoveryRunReportsThePassThatFoundTheStoreClosed(t *testing.T) {
	is := is.New(t)
	store := memstoreFor(t)
	is.NoErr(store.Close())
	var reported []error
	ctx, cancel := context.WithTimeout(context.Background(), safetyNet)
	defer cancel()
	err := turnframe.NewRecovery(store).Run(ctx, turnframe.RecoveryLoop{Handler: polNoTurns{t}, Interval: time.Millisecond,
		Report: func(_ turnframe.RecoverReport, err error) { reported = append(reported, err) }})
	is.True(errors.Is(err, turnframe.ErrClosed))
	is.Equal(len(reported), 1)                           // the pass was reported
	is.True(errors.Is(reported[0], turnframe.ErrClosed)) // with the error that ended the run
}

// Recovery.Run: a pass in progress when ctx ends is cut short and not
// reported; Run returns nil.
func TestARecoveryRunDoesNotReportAPassCutShort(t *testing.T) {
	is := is.New(t)
	store := memstoreFor(t)
	rt := turnframe.New(store)
	rtPlanned(t, rt, rtAccount, rtCmd("k1", "booking/1", "book"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := &runSeen{then: cancel} // the caller gives up while the pass hands over its turn
	reports := 0
	err := turnframe.NewRecovery(store).Run(ctx, turnframe.RecoveryLoop{Handler: h, Interval: time.Millisecond,
		Report: func(turnframe.RecoverReport, error) { reports++ }})
	is.NoErr(err)
	is.Equal(len(h.seen()), 1) // the pass reached the turn
	is.Equal(reports, 0)       // and was not reported
}

// Recovery.Run: later passes keep the first scope's Account, and leave
// alone a turn touched less than the command lease (timeout and margin)
// ago, which an Execute may still be running.
func TestLaterRecoveryRunPassesKeepTheAccountAndTheCommandLease(t *testing.T) {
	is := is.New(t)
	store := memstoreFor(t)
	clock := newStepClock(dispNow)
	opts := []turnframe.Option{turnframe.WithClock(clock.read),
		turnframe.WithCommandTimeout(time.Minute), turnframe.WithLeaseMargin(time.Minute)}
	rt := turnframe.New(store, opts...)
	rtPlanned(t, rt, "acme", rtCmd("k1", "booking/1", "book"))   // touched at dispNow
	rtPlanned(t, rt, "globex", rtCmd("k1", "booking/1", "book")) // another tenant's
	h := &runSeen{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	passes := 0
	loop := turnframe.RecoveryLoop{Scope: turnframe.RecoveryScope{Account: "acme"}, Handler: h, Interval: time.Millisecond,
		Report: func(_ turnframe.RecoverReport, err error) {
			if err != nil {
				t.Errorf("pass: %v", err)
			}
			passes++
			switch passes {
			case 1:
				// Ninety seconds on: past the command timeout, not past
				// the lease: the turn may be in flight.
				clock.set(dispNow.Add(90 * time.Second))
			case 2:
				clock.set(dispNow.Add(time.Hour)) // both turns long stale
			case 3:
				cancel()
			}
		}}
	is.NoErr(turnframe.NewRecovery(store, opts...).Run(ctx, loop))
	is.Equal(passes, 3)
	// The start-up pass and the third handed over acme's turn; the second
	// left it alone; no pass handed over globex's.
	is.Equal(h.seen(), []turnframe.AccountID{"acme", "acme"})
}
