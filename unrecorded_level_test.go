package turnframe_test

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// levelLog keeps the level of each record logged under msg; with msg
// empty, of every record.
type levelLog struct {
	msg    string
	mu     sync.Mutex
	levels []slog.Level
}

func (l *levelLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *levelLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *levelLog) WithGroup(string) slog.Handler            { return l }
func (l *levelLog) Handle(_ context.Context, r slog.Record) error {
	if l.msg == "" || r.Message == l.msg {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.levels = append(l.levels, r.Level)
	}
	return nil
}

func (l *levelLog) seen() []slog.Level {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]slog.Level(nil), l.levels...)
}

// An unknown outcome the store refuses is logged as an error: it may have
// acted and nothing records it. But when the refusal is because the
// attempt's lease ended and Recover declared the entry unknown meanwhile,
// the entry already says what the policy needs, and an error paged an
// operator for nothing to do. It is a warning then.
func TestAnUnknownOutcomeDroppedOnAnEntryDeclaredUnknownIsAWarning(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		logs := &levelLog{msg: "turnframe: command outcome could not be recorded"}
		t0 := time.Now().UTC().Truncate(time.Microsecond)
		book := turnframe.WithCommand("book", turnframe.Remote{}) // can do neither
		holder := turnframe.New(store, turnframe.WithClock(newStepClock(t0).read), turnframe.WithCommandTimeout(time.Minute),
			turnframe.WithLogger(slog.New(logs)), book)
		turn := rtPlanned(t, holder, rtAccount, rtCmd("k-book", "flight/7", "book"))
		finish := rtHeld(t, holder, turn, "k-book", turnframe.Unknown("timeout"))
		end := rtEntry(t, store, "k-book").LeaseUntil

		rec := turnframe.NewRecovery(store, turnframe.WithClock(func() time.Time { return end.Add(time.Second) }), book)
		_, err := rec.Recover(context.Background(), turnframe.RecoveryScope{}, polNoTurns{t})
		is.NoErr(err)
		is.True(rtEntry(t, store, "k-book").Status.IsUncertain()) // declared unknown: the lease ended

		_, err = finish()
		is.True(err != nil)                                 // the holder's outcome was refused
		is.Equal(logs.seen(), []slog.Level{slog.LevelWarn}) // and logged once, as a warning
	})
}

// refuseUnknowns refuses every Write that would settle an entry unknown,
// as a store that went away would.
type refuseUnknowns struct{ turnframe.Store }

func (s refuseUnknowns) Apply(ctx context.Context, w turnframe.Write) (turnframe.Applied, error) {
	for _, st := range w.Settle {
		if st.To == turnframe.JournalOutcomeUnknown {
			return turnframe.Applied{}, turnframe.ErrClosed
		}
	}
	return s.Store.Apply(ctx, w)
}

// The other side of the warning: an unknown outcome refused while the
// entry stays Executing is on record nowhere, and it is an error.
func TestAnUnknownOutcomeOnRecordNowhereIsAnError(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		logs := &levelLog{msg: "turnframe: command outcome could not be recorded"}
		holder := turnframe.New(refuseUnknowns{store}, turnframe.WithLogger(slog.New(logs)))
		turn := rtPlanned(t, holder, rtAccount, rtCmd("k-book", "flight/7", "book"))
		finish := rtHeld(t, holder, turn, "k-book", turnframe.Unknown("timeout"))
		_, err := finish()
		is.True(err != nil)                                                      // refused
		is.Equal(rtEntry(t, store, "k-book").Status, turnframe.JournalExecuting) // nothing recorded it
		is.Equal(logs.seen(), []slog.Level{slog.LevelError})                     // an error
	})
}

// lostPutBacks answers every put-back of an unsent row ErrClaimLost, as
// the store does once recovery expired the claim and another took it.
// claimed runs after each claim.
type lostPutBacks struct {
	turnframe.Store
	claimed func()
}

func (s lostPutBacks) ClaimDue(ctx context.Context, now time.Time, limit int, worker string, lease time.Duration) ([]turnframe.Claim, error) {
	cs, err := s.Store.ClaimDue(ctx, now, limit, worker, lease)
	s.claimed()
	return cs, err
}

func (s lostPutBacks) Settle(ctx context.Context, ss []turnframe.OutboxSettlement) ([]error, error) {
	results := make([]error, len(ss))
	var rest []turnframe.OutboxSettlement
	var at []int
	for i, st := range ss {
		if st.Code == turnframe.CodeNotSent {
			results[i] = turnframe.ErrClaimLost
			continue
		}
		rest, at = append(rest, st), append(at, i)
	}
	if len(rest) > 0 {
		got, err := s.Store.Settle(ctx, rest)
		if err != nil {
			return nil, err
		}
		for j, i := range at {
			results[i] = got[j]
		}
	}
	return results, nil
}

// A claimed row whose lease ran out before its send started is put back
// unsent; when that put-back is refused because the claim was lost,
// nothing was sent under the claim and the row is another's. It was
// logged as an error, "settle it by hand", for a row nobody needs to
// touch. It is a warning.
func TestAnUnsentRowWhoseClaimWasLostIsNotForAnOperator(t *testing.T) {
	eachStore(t, func(t *testing.T, inner turnframe.Store) {
		is := is.New(t)
		enqueueFour(t, inner)
		logs := &levelLog{}
		cfg := turnframe.DefaultDispatchConfig("w1")
		clock := newStepClock(dispNow)
		late := func() { clock.set(dispNow.Add(cfg.Lease() + time.Second)) } // every send finds its lease ended
		var sends atomic.Int32
		sender := turnframe.SenderFunc(func(context.Context, turnframe.OutboxEntry) turnframe.Dispatched {
			sends.Add(1)
			return turnframe.Dispatched{Kind: turnframe.DispatchCompleted}
		})
		d := turnframe.NewDispatcher(lostPutBacks{inner, late}, sender, cfg, turnframe.WithClock(clock.read), turnframe.WithLogger(slog.New(logs)))
		report, err := d.RunOnce(context.Background(), dispNow)
		is.NoErr(err)
		is.Equal(sends.Load(), int32(0))   // no send started
		is.Equal(len(report.Unsettled), 4) // every put-back refused
		for _, l := range logs.seen() {
			is.True(l < slog.LevelError) // nothing for an operator
		}
	})
}
