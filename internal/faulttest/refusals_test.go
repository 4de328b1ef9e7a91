package faulttest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/turnframe/turnframe"
)

// refusals are well-formed calls the state refuses: a take whose Prior is
// not the attempt the entry is under, a take-over of a live lease, a
// settlement by an attempt that does not hold the entry, a stale attempt on
// an unknown outcome, a resend on an abandoned turn, a lost claim. None is
// bad input: each must keep its class (ErrConflict, ErrClaimLost,
// ErrNotFound), never be ErrInvalid, and write nothing.
func refusals() []struct {
	name string
	want error
	do   func(ctx context.Context, f *fixture) error
} {
	ids := turnframe.NewIDGenerator()
	apply := func(ctx context.Context, f *fixture, w turnframe.Write) error {
		w.Account = f.account
		if w.Now.IsZero() {
			w.Now = t0.Add(time.Minute)
		}
		_, err := f.store.Apply(ctx, w)
		return err
	}
	take := func(key turnframe.IdempotencyKey, prior turnframe.AttemptID) turnframe.Settlement {
		return turnframe.Settlement{Key: key, To: turnframe.JournalExecuting, Attempt: ids.AttemptID(t0), Prior: prior, Lease: time.Minute}
	}
	conflict, lost, notFound := turnframe.ErrConflict, turnframe.ErrClaimLost, turnframe.ErrNotFound
	type r = struct {
		name string
		want error
		do   func(ctx context.Context, f *fixture) error
	}
	return []r{
		{"Apply/TakeWithStalePrior", conflict, func(ctx context.Context, f *fixture) error {
			return apply(ctx, f, turnframe.Write{Turn: f.planned, Settle: []turnframe.Settlement{take("p1", ids.AttemptID(t0))}})
		}},
		{"Apply/TakeOverLiveLease", conflict, func(ctx context.Context, f *fixture) error {
			return apply(ctx, f, turnframe.Write{Turn: f.planned, Settle: []turnframe.Settlement{take("x1", f.xAttempt)}})
		}},
		{"Apply/TakeOverALeaseThatEndsAMicrosecondLater", conflict, func(ctx context.Context, f *fixture) error {
			return apply(ctx, f, turnframe.Write{Turn: f.planned, Now: t0.Add(fixtureLease - time.Microsecond),
				Settle: []turnframe.Settlement{take("x1", f.xAttempt)}})
		}},
		{"Apply/TakeOverEndedLeaseWithoutPrior", conflict, func(ctx context.Context, f *fixture) error {
			return apply(ctx, f, turnframe.Write{Turn: f.planned, Now: t0.Add(2 * fixtureLease),
				Settle: []turnframe.Settlement{take("x1", turnframe.AttemptID{})}})
		}},
		{"Apply/SettleByAnotherAttempt", conflict, func(ctx context.Context, f *fixture) error {
			return apply(ctx, f, turnframe.Write{Turn: f.planned,
				Settle: []turnframe.Settlement{{Key: "x1", To: turnframe.JournalRejected, Attempt: ids.AttemptID(t0)}}})
		}},
		{"Apply/ReconcileAnAttemptOfAnOpenTurn", conflict, func(ctx context.Context, f *fixture) error {
			return apply(ctx, f, turnframe.Write{Turn: f.planned, Now: t0.Add(2 * fixtureLease),
				Settle: []turnframe.Settlement{{Key: "x1", To: turnframe.JournalRejected, Code: "gone"}}})
		}},
		{"Apply/SupersededAttemptOverwritesUnknown", conflict, func(ctx context.Context, f *fixture) error {
			return apply(ctx, f, turnframe.Write{Turn: f.unknownTurn,
				Settle: []turnframe.Settlement{{Key: "u1", To: turnframe.JournalCommitted, Attempt: f.uAttempt}}})
		}},
		{"Apply/ResendOnAbandonedTurn", conflict, func(ctx context.Context, f *fixture) error {
			return apply(ctx, f, turnframe.Write{Turn: f.abandoned, Settle: []turnframe.Settlement{{Key: "v1", To: turnframe.JournalPending}}})
		}},
		{"Apply/KeyForAnotherCommand", conflict, func(ctx context.Context, f *fixture) error {
			return apply(ctx, f, turnframe.Write{Turn: f.planned, Admit: []turnframe.Command{{Key: "k1", Case: "c1", Name: "other"}}})
		}},
		{"Complete/LostClaim", lost, func(ctx context.Context, f *fixture) error {
			c := f.claim
			c.Worker = "w-other"
			return f.store.Complete(ctx, c, "ref", t0)
		}},
		{"ExtendClaims/LostClaim", lost, func(ctx context.Context, f *fixture) error {
			c := f.claim
			c.Attempts++
			res, err := f.store.ExtendClaims(ctx, []turnframe.Claim{c}, t0, time.Minute)
			if err != nil {
				return errors.New("the call failed as a whole: " + err.Error())
			}
			return res[0]
		}},
		{"ReleaseClaim/NotDispatching", conflict, func(ctx context.Context, f *fixture) error {
			return f.store.ReleaseClaim(ctx, f.unknownRow, t0)
		}},
		{"ReleaseClaim/Missing", notFound, func(ctx context.Context, f *fixture) error {
			return f.store.ReleaseClaim(ctx, ids.OutboxID(t0), t0)
		}},
		{"Requeue/NotFailed", conflict, func(ctx context.Context, f *fixture) error { return f.store.Requeue(ctx, f.unknownRow, t0) }},
		{"Resolve/NotUnknown", conflict, func(ctx context.Context, f *fixture) error {
			return f.store.Resolve(ctx, f.claim.ID, turnframe.VerdictCompleted, "", t0)
		}},
	}
}

// TestStoreRefusalsAreNotBadInput: every refusal of the new contract says
// its own class, not ErrInvalid, does not panic and writes nothing, on both
// stores.
func TestStoreRefusalsAreNotBadInput(t *testing.T) {
	for _, o := range openers {
		t.Run(o.name, func(t *testing.T) {
			f := newFixture(t, o)
			before, dump := fileState(t, f.path), dumpStore(t, f)
			for _, c := range refusals() {
				t.Run(c.name, func(t *testing.T) {
					is := is.New(t)
					err := safely(func() error { return c.do(bg, f) })
					is.True(errors.Is(err, c.want))                // its class
					is.True(!errors.Is(err, turnframe.ErrInvalid)) // not bad input
				})
			}
			is := is.New(t)
			is.Equal(fileState(t, f.path), before) // the file is unchanged
			is.Equal(dumpStore(t, f), dump)        // the store holds what it held
		})
	}
}
