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
// an unknown outcome, a resend on an abandoned turn, a lost claim, a move
// out of needs intervention by an actor that may not intervene, a cursor
// or an evidence subject that does not exist. None is
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
			return turnframe.CompleteClaim(ctx, f.store, c, "ref", t0)
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
			return f.store.ReleaseClaim(ctx, f.unknownRow, 0, t0)
		}},
		{"ReleaseClaim/Missing", notFound, func(ctx context.Context, f *fixture) error {
			return f.store.ReleaseClaim(ctx, ids.OutboxID(t0), 0, t0)
		}},
		{"Requeue/NotFailed", conflict, func(ctx context.Context, f *fixture) error { return f.store.Requeue(ctx, f.unknownRow, 0, t0) }},
		{"Resolve/NotUnknown", conflict, func(ctx context.Context, f *fixture) error {
			return f.store.Resolve(ctx, turnframe.Resolution{ID: f.claim.ID, Verdict: turnframe.VerdictCompleted, Now: t0})
		}},
		{"Resolve/Missing", notFound, func(ctx context.Context, f *fixture) error {
			return f.store.Resolve(ctx, turnframe.Resolution{ID: ids.OutboxID(t0), Verdict: turnframe.VerdictCompleted, Now: t0})
		}},
		// Issue 13: intervention, expiry, paging and evidence.
		{"Apply/InterveneAsThePolicy", conflict, func(ctx context.Context, f *fixture) error {
			return apply(ctx, f, turnframe.Write{Turn: f.intervention, Actor: turnframe.ActorPolicy,
				Settle: []turnframe.Settlement{{Key: "n1", To: turnframe.JournalCommitted}}})
		}},
		{"Apply/InterveneAsRecovery", conflict, func(ctx context.Context, f *fixture) error {
			return apply(ctx, f, turnframe.Write{Turn: f.intervention, Actor: turnframe.ActorRecovery,
				Settle: []turnframe.Settlement{{Key: "n1", To: turnframe.JournalPending}}})
		}},
		{"Apply/InterveneAsAWorker", conflict, func(ctx context.Context, f *fixture) error {
			return apply(ctx, f, turnframe.Write{Turn: f.intervention, Actor: turnframe.WorkerActor("w1"),
				Settle: []turnframe.Settlement{{Key: "n1", To: turnframe.JournalRejected, Code: "no"}}})
		}},
		{"Apply/InterveneWithTheAttemptThatRan", conflict, func(ctx context.Context, f *fixture) error {
			return apply(ctx, f, turnframe.Write{Turn: f.intervention, Actor: turnframe.ActorOperator,
				Settle: []turnframe.Settlement{{Key: "n1", To: turnframe.JournalCommitted, Attempt: f.nAttempt}}})
		}},
		{"Apply/EscalateAnEntryThatNeedsInterventionAgain", conflict, func(ctx context.Context, f *fixture) error {
			return apply(ctx, f, turnframe.Write{Turn: f.intervention, Actor: turnframe.ActorOperator,
				Settle: []turnframe.Settlement{{Key: "n1", To: turnframe.JournalNeedsIntervention}}})
		}},
		{"Apply/DeclareALiveAttemptUnknown", conflict, func(ctx context.Context, f *fixture) error {
			return apply(ctx, f, turnframe.Write{Turn: f.planned, Now: t0.Add(fixtureLease - time.Microsecond), Actor: turnframe.ActorRecovery,
				Settle: []turnframe.Settlement{{Key: "x1", To: turnframe.JournalOutcomeUnknown, Code: turnframe.CodeLeaseEnded}}})
		}},
		{"Apply/EscalateARunningAttempt", conflict, func(ctx context.Context, f *fixture) error {
			return apply(ctx, f, turnframe.Write{Turn: f.planned, Now: t0.Add(2 * fixtureLease), Actor: turnframe.ActorPolicy,
				Settle: []turnframe.Settlement{{Key: "x1", To: turnframe.JournalNeedsIntervention}}})
		}},
		{"Resolve/InterventionAsThePolicy", conflict, func(ctx context.Context, f *fixture) error {
			return f.store.Resolve(ctx, turnframe.Resolution{ID: f.interventionRow, Verdict: turnframe.VerdictResend, Actor: turnframe.ActorPolicy, Now: t0})
		}},
		{"Resolve/InterventionAsAWorker", conflict, func(ctx context.Context, f *fixture) error {
			return f.store.Resolve(ctx, turnframe.Resolution{ID: f.interventionRow, Verdict: turnframe.VerdictCompleted, Actor: "worker:w1", Now: t0})
		}},
		{"Resolve/EscalateAgain", conflict, func(ctx context.Context, f *fixture) error {
			return f.store.Resolve(ctx, turnframe.Resolution{ID: f.interventionRow, Verdict: turnframe.VerdictEscalate, Actor: turnframe.ActorOperator, Now: t0})
		}},
		{"ListOutbox/AfterAMissingRow", notFound, func(ctx context.Context, f *fixture) error {
			_, err := f.store.ListOutbox(ctx, turnframe.OutboxFilter{After: ids.OutboxID(t0), Limit: 10})
			return err
		}},
		{"RecordEvidence/MissingKey", notFound, func(ctx context.Context, f *fixture) error {
			return f.store.RecordEvidence(ctx, turnframe.NewEvidence(turnframe.JournalSubject(f.account, "never"), "", turnframe.ActorOperator, "", "", "", t0))
		}},
		{"RecordEvidence/AnotherTenantsRow", notFound, func(ctx context.Context, f *fixture) error {
			return f.store.RecordEvidence(ctx, turnframe.NewEvidence(turnframe.OutboxSubject("other", f.unknownRow), "", turnframe.ActorOperator, "", "", "", t0))
		}},
		{"RecordEvidence/AnotherTenantsTurn", notFound, func(ctx context.Context, f *fixture) error {
			return f.store.RecordEvidence(ctx, turnframe.NewEvidence(turnframe.TurnSubject("other", f.turn), "", turnframe.ActorOperator, "", "", "", t0))
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
