package turnframe_test

import (
	"context"
	"errors"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// Rules the root package keeps that no test held it to, each found by a
// mutant every other test let live (mutation run B, 2026-12-01).

// A Decision's Attempt names the attempt a person looked at: for an outbox
// row an attempt number, which starts at 1. "0" names no attempt a row was
// ever at and is refused as input, never read as "no fence", which would
// settle whatever attempt the row is at now.
func TestSettlesAttemptNumberOfARowStartsAtOne(t *testing.T) {
	for _, attempt := range []string{"0", "00", "-1", "one"} {
		t.Run(attempt, func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				row := polUnknownRow(t, store, "k1", "payments")
				err := turnframe.NewRecovery(store).Settle(context.Background(), turnframe.OutboxSubject(rtAccount, row.ID),
					turnframe.Decision{Verdict: turnframe.VerdictCompleted, Actor: turnframe.ActorOperator, Attempt: attempt})
				is.True(errors.Is(err, turnframe.ErrInvalid)) // refused as input
				var ie *turnframe.InvalidError
				is.True(errors.As(err, &ie))
				is.Equal(ie.Field, "attempt")                                              // naming the field
				is.Equal(dispGet(t, store, row.ID).Status, turnframe.OutboxOutcomeUnknown) // and nothing settled
			})
		})
	}
}
