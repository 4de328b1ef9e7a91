package turnframe_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// Decision.Attempt: "Attempt, when not empty, is the attempt the decision
// was made about ... Settle then refuses (ErrConflict) a subject at another
// attempt"; Recovery.Settle: "ErrInvalid for a bad ... attempt". For a
// journal entry, the zero attempt id "00000000000000000000000000" is not the
// attempt the entry is at (no attempt is zero), so it must be refused, one
// way or the other — never read as "no fence" and settle whatever attempt
// the entry is at now.
func TestSettleOfAnEntryAtTheZeroAttemptIdIsRefused(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		clock := newPolClock(time.Now().UTC().Truncate(time.Microsecond))
		polUnknownCommand(t, store, clock)
		before := rtEntry(t, store, "k-charge")
		is.True(!before.Attempt.IsZero())
		zero := turnframe.AttemptID{}.String()
		err := turnframe.NewRecovery(store, turnframe.WithClock(clock.Now)).Settle(context.Background(),
			turnframe.JournalSubject(rtAccount, "k-charge"),
			turnframe.Decision{Verdict: turnframe.VerdictCompleted, Actor: turnframe.ActorOperator, Attempt: zero})
		is.True(errors.Is(err, turnframe.ErrInvalid))                                   // the zero id names no attempt
		is.Equal(rtEntry(t, store, "k-charge").Status, turnframe.JournalOutcomeUnknown) // nothing settled
	})
}
