package turnframe_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/memstore"
)

// boundsNoop answers every turn decision with nothing: these tests look at
// the outbox's part of Recover only.
type boundsNoop struct{}

func (boundsNoop) RestartInterpretation(context.Context, turnframe.TurnPhaseMarker, turnframe.RecoveryAction) error {
	return nil
}
func (boundsNoop) ResumeCommands(context.Context, turnframe.TurnPhaseMarker, turnframe.RecoveryAction) error {
	return nil
}
func (boundsNoop) RegenerateResponse(context.Context, turnframe.TurnPhaseMarker, turnframe.RecoveryAction) error {
	return nil
}

// unknownRowsOf makes n outbox rows of account, each with a payload of size
// bytes, whose sends timed out (OutcomeUnknown, CodeSendTimeout) at t0.
func unknownRowsOf(t *testing.T, s turnframe.Store, account turnframe.AccountID, t0 time.Time, n, size int) {
	t.Helper()
	is := is.New(t)
	ctx := context.Background()
	ids := turnframe.NewIDGenerator()
	per := min(n, 1000)
	msgs := make([]turnframe.OutboxMessage, per)
	for i := range msgs {
		msgs[i] = turnframe.OutboxMessage{Destination: "mail", Payload: make([]byte, size)}
	}
	for i := range n / per {
		turn, attempt := ids.TurnID(t0), ids.AttemptID(t0)
		key := turnframe.IdempotencyKey(fmt.Sprintf("k%d", i))
		_, err := s.Apply(ctx, turnframe.Write{Account: account, Turn: turn, Now: t0,
			Begin:  &turnframe.StoredTurn{Account: account, ID: turn, Conversation: ids.ConversationID(t0), Text: "x"},
			Admit:  []turnframe.Command{{Key: key, Case: "c", Name: "notify"}},
			Settle: []turnframe.Settlement{{Key: key, To: turnframe.JournalExecuting, Attempt: attempt, Lease: time.Minute}},
			Phase:  turnframe.PhaseExecuting})
		is.NoErr(err)
		_, err = s.Apply(ctx, turnframe.Write{Account: account, Turn: turn, Now: t0,
			Settle: []turnframe.Settlement{{Key: key, To: turnframe.JournalCommitted, Attempt: attempt}},
			Outbox: msgs, Phase: turnframe.PhaseCommitted})
		is.NoErr(err)
	}
	claims, err := s.ClaimDue(ctx, t0, n, "w", time.Minute)
	is.NoErr(err)
	is.Equal(len(claims), n)
	sets := make([]turnframe.OutboxSettlement, n)
	for i, c := range claims {
		sets[i] = turnframe.OutboxSettlement{Claim: c, To: turnframe.OutboxOutcomeUnknown, Code: turnframe.CodeSendTimeout, Now: t0.Add(time.Second)}
	}
	_, err = s.Settle(ctx, sets)
	is.NoErr(err)
}

// RecoverReport: "Its Uncertain values carry no Payload". Each pass of
// Recover, and of Dispatcher.Run's release every PollInterval, reported
// every unknown row it met with the row's payload, so a day of timed-out
// sends of large payloads was held in memory at once, every second.
func TestARecoverReportHoldsNoPayload(t *testing.T) {
	eachStore(t, func(t *testing.T, s turnframe.Store) {
		is := is.New(t)
		t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		unknownRowsOf(t, s, "acme", t0, 10, 1024)
		r := turnframe.NewRecovery(s, turnframe.WithDestination("mail", turnframe.Remote{}), // escalated at once
			turnframe.WithLogger(slog.New(slog.DiscardHandler)), turnframe.WithClock(func() time.Time { return t0.Add(time.Hour) }))
		report, err := r.Recover(context.Background(), turnframe.RecoveryScope{}, boundsNoop{})
		is.NoErr(err)
		is.Equal(len(report.Policy), 10)
		is.Equal(len(report.NeedsIntervention), 10)
		for _, p := range report.Policy {
			is.Equal(p.Uncertain.Payload, nil) // the report names the row; it holds no payload
		}
		for _, u := range report.NeedsIntervention {
			is.Equal(u.Payload, nil)
		}
	})
}

// RecoverReport.NeedsIntervention lists at most MaxLimit, the oldest
// first; one tenant whose remote escalated MaxLimit rows filled it for
// good, and nothing said that another tenant's escalated row waited too.
// MoreNeedIntervention says so now, and a scope names the account.
func TestRecoverSaysWhenMoreNeedIntervention(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s := memstore.New()
	defer s.Close()
	unknownRowsOf(t, s, "big", t0, turnframe.MaxLimit, 0)
	r := turnframe.NewRecovery(s, turnframe.WithDestination("mail", turnframe.Remote{}), // escalated at once
		turnframe.WithLogger(slog.New(slog.DiscardHandler)), turnframe.WithClock(func() time.Time { return t0.Add(time.Hour) }))
	report, err := r.Recover(ctx, turnframe.RecoveryScope{}, boundsNoop{})
	is.NoErr(err)
	is.Equal(len(report.NeedsIntervention), turnframe.MaxLimit)
	is.True(!report.MoreNeedIntervention) // exactly MaxLimit wait: none more

	unknownRowsOf(t, s, "small", t0.Add(time.Minute), 1, 0)
	report, err = r.Recover(ctx, turnframe.RecoveryScope{}, boundsNoop{})
	is.NoErr(err)
	is.Equal(len(report.NeedsIntervention), turnframe.MaxLimit)
	is.True(report.MoreNeedIntervention) // small's row waits too, beyond the list

	report, err = r.Recover(ctx, turnframe.RecoveryScope{Account: "small"}, boundsNoop{})
	is.NoErr(err)
	is.Equal(len(report.NeedsIntervention), 1) // the account's own listing
	is.Equal(report.NeedsIntervention[0].Subject.Account, turnframe.AccountID("small"))
	is.True(!report.MoreNeedIntervention)
}

// The same for the entries awaiting approval: AwaitingApproval kept each
// listed entry whole, its command's Payload included, so a backlog of
// proposals waiting for a person was held in memory by every Recover.
func TestARecoverReportHoldsNoPayloadOfAnEntryAwaitingApproval(t *testing.T) {
	eachStore(t, func(t *testing.T, s turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		ids := turnframe.NewIDGenerator()
		for i := range 3 {
			turn := ids.TurnID(t0)
			_, err := s.Apply(ctx, turnframe.Write{Account: "acme", Turn: turn, Now: t0,
				Begin: &turnframe.StoredTurn{Account: "acme", ID: turn, Conversation: ids.ConversationID(t0), Text: "pay"},
				Admit: []turnframe.Command{{Key: turnframe.IdempotencyKey(fmt.Sprintf("pay%d", i)), Case: "c", Name: "pay",
					Payload: make([]byte, 4096), NeedsApproval: true}},
				Phase: turnframe.PhasePlanned})
			is.NoErr(err)
		}
		r := turnframe.NewRecovery(s, turnframe.WithLogger(slog.New(slog.DiscardHandler)),
			turnframe.WithClock(func() time.Time { return t0.Add(time.Hour) }))
		report, err := r.Recover(ctx, turnframe.RecoveryScope{}, boundsNoop{})
		is.NoErr(err)
		is.Equal(len(report.AwaitingApproval), 3)
		for _, e := range report.AwaitingApproval {
			is.Equal(len(e.Payload), 0) // the report names the entry; it holds no payload
		}
	})
}
