package turnframe_test

import (
	"context"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// Recover's side of TestADeclarationRefusedWhileTheLeaseRunsIsInFlight: an
// attempt of a command whose Remote forbids a blind rerun, its lease ended
// on Recovery's clock and running on the store's. The store refuses to
// declare it unknown; that is the attempt in flight, not a failure, and
// Recover reported it as a refused write (PolicyResult.Err). It reports it
// waiting, until the lease's end, and the holder's outcome lands.
func TestRecoverReportsADeclarationTheStoreRefusesWhileTheLeaseRunsAsWaiting(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		t0 := time.Now().UTC().Truncate(time.Microsecond)
		book := turnframe.WithCommand("book", turnframe.Remote{}) // can do neither
		holder := turnframe.New(store, turnframe.WithClock(newStepClock(t0).read), turnframe.WithCommandTimeout(time.Minute),
			turnframe.WithLeaseMargin(time.Second), book)
		turn := rtPlanned(t, holder, rtAccount, rtCmd("k-book", "flight/7", "book"))
		finish := rtHeld(t, holder, turn, "k-book", turnframe.Commit(nil))
		held := rtEntry(t, store, "k-book")
		end := held.LeaseUntil

		onItsOwnClock := &rtStoreClock{Store: store, now: func() time.Time { return end.Add(-time.Microsecond) }}                     // the store: it runs
		rec := turnframe.NewRecovery(onItsOwnClock, turnframe.WithClock(func() time.Time { return end.Add(time.Microsecond) }), book) // Recovery: it ended
		report, err := rec.Recover(context.Background(), turnframe.RecoveryScope{}, polNoTurns{t})
		is.NoErr(err)
		is.Equal(len(report.Policy), 1)                                          // the one attempt
		is.NoErr(report.Policy[0].Err)                                           // not a failure
		is.Equal(report.Policy[0].Outcome, turnframe.PolicyWaiting)              // in flight: a later Recover looks again
		is.True(report.Policy[0].NextAt.Equal(end))                              // once its lease ended
		is.Equal(rtEntry(t, store, "k-book").Status, turnframe.JournalExecuting) // not declared unknown

		_, err = finish()
		is.NoErr(err)                                                            // the holder's Execute
		is.Equal(rtEntry(t, store, "k-book").Status, turnframe.JournalCommitted) // its outcome landed
	})
}
