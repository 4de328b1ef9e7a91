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

// whStore counts the History reads and claims a Dispatcher makes, fails
// every History read when failing is set, and ends Run (stop) once a claim
// after a failed read comes back empty — the loop would now wait for its
// poll — or once the reads reach spin.
type whStore struct {
	turnframe.Store
	failing bool
	spin    int
	stop    context.CancelFunc

	mu        sync.Mutex
	histories int
	claims    int
}

func (s *whStore) History(ctx context.Context, subject turnframe.Subject, after int64, limit int) ([]turnframe.HistoryRecord, error) {
	s.mu.Lock()
	s.histories++
	n := s.histories
	s.mu.Unlock()
	if s.failing {
		if n >= s.spin && s.stop != nil {
			s.stop()
		}
		return nil, errors.New("history: the replica is down")
	}
	return s.Store.History(ctx, subject, after, limit)
}

func (s *whStore) ClaimDue(ctx context.Context, now time.Time, limit int, worker string, lease time.Duration) ([]turnframe.Claim, error) {
	claims, err := s.Store.ClaimDue(ctx, now, limit, worker, lease)
	s.mu.Lock()
	s.claims++
	read := s.histories
	s.mu.Unlock()
	if err == nil && len(claims) == 0 && read > 0 && s.stop != nil {
		s.stop()
	}
	return claims, err
}

func (s *whStore) counts() (histories, claims int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.histories, s.claims
}

// A row whose history cannot be read is not sent (it might be a lapsed
// resend), and is put back Pending. Put back due at once, Run claimed it
// again at once, read the failing history again, and so on: a hot loop
// against a store already failing, for as long as it failed, on a clock
// that never moved. It is put back with the row's backoff instead, so on a
// clock that stands still Run claims it once and then waits.
func TestAnOutboxRowWhoseHistoryCannotBeReadIsNotClaimedInAHotLoop(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		remote := turnframe.Remote{Deduplicates: time.Hour}
		row := polUnknownRow(t, store, "k1", "payments")
		clock := newPolClock(dispNow.Add(time.Minute))
		polResend(t, context.Background(), store, clock, remote)
		clock.Add(2 * time.Hour) // claimed only after the remote forgot the key

		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		wrapped := &whStore{Store: store, failing: true, spin: 20, stop: cancel}
		sender := &dispAnswer{out: turnframe.Dispatched{Kind: turnframe.DispatchCompleted}}
		d := turnframe.NewDispatcher(wrapped, sender, turnframe.DispatchConfig{WorkerID: "w2", PollInterval: time.Hour},
			turnframe.WithClock(clock.Now), turnframe.WithDestination("payments", remote))
		is.NoErr(d.Run(ctx))

		histories, _ := wrapped.counts()
		is.Equal(histories, 1)            // read once; not again until the row is due again
		is.Equal(sender.count(row.ID), 0) // and never sent while it could not be told apart
		got := dispGet(t, store, row.ID)
		is.Equal(got.Status, turnframe.OutboxPending) // put back, unsent
		is.Equal(got.LastCode, turnframe.CodeNotSent)
		is.True(got.DueAt.After(clock.Now())) // not due at once
	})
}

// The check costs a send nothing unless the row may be a lapsed resend: a
// row within its remote's window, even a resend, or one past it on its
// first attempt, is sent without its history being read.
func TestAnOutboxRowWithinItsWindowIsSentWithoutReadingItsHistory(t *testing.T) {
	remote := turnframe.Remote{Deduplicates: time.Hour}
	for _, tt := range []struct {
		name string
		row  func(t *testing.T, store turnframe.Store, clock *polClock) turnframe.OutboxID
	}{
		{"a first send", func(t *testing.T, store turnframe.Store, clock *polClock) turnframe.OutboxID {
			return dispEnqueue(t, store, rtAccount, "k1", turnframe.OutboxMessage{Destination: "payments", Payload: []byte("p")})[0].ID
		}},
		{"a first send past the window", func(t *testing.T, store turnframe.Store, clock *polClock) turnframe.OutboxID {
			id := dispEnqueue(t, store, rtAccount, "k1", turnframe.OutboxMessage{Destination: "payments", Payload: []byte("p")})[0].ID
			clock.Add(2 * time.Hour)
			return id
		}},
		{"the policy's resend within the window", func(t *testing.T, store turnframe.Store, clock *polClock) turnframe.OutboxID {
			row := polUnknownRow(t, store, "k1", "payments")
			clock.Add(time.Minute)
			polResend(t, context.Background(), store, clock, remote)
			return row.ID
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				clock := newPolClock(dispNow)
				id := tt.row(t, store, clock)
				wrapped := &whStore{Store: store}
				sender := &dispAnswer{out: turnframe.Dispatched{Kind: turnframe.DispatchCompleted}}
				report, err := turnframe.NewDispatcher(wrapped, sender, turnframe.DispatchConfig{WorkerID: "w2"},
					turnframe.WithClock(clock.Now), turnframe.WithDestination("payments", remote)).RunOnce(context.Background(), clock.Now())
				is.NoErr(err)
				is.Equal(report.Completed, []turnframe.OutboxID{id}) // sent
				histories, _ := wrapped.counts()
				is.Equal(histories, 0) // and its history never read
			})
		})
	}
}

// A withheld resend at the head of its order key holds the key, as any
// unknown row does, and then as NeedsIntervention once escalated: the row
// enqueued after it is not sent ahead of it.
func TestAWithheldResendHoldsItsOrderKey(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		remote := turnframe.Remote{Deduplicates: time.Hour}
		rows := dispEnqueue(t, store, rtAccount, "k1",
			turnframe.OutboxMessage{Destination: "payments", Payload: []byte("first"), OrderKey: "acct-9"},
			turnframe.OutboxMessage{Destination: "payments", Payload: []byte("second"), OrderKey: "acct-9"})
		head, next := rows[0], rows[1]
		claims, err := store.ClaimDue(ctx, dispNow, 16, "w1", time.Minute)
		is.NoErr(err)
		is.Equal(len(claims), 1) // the head alone
		is.NoErr(turnframe.MarkClaimUnknown(ctx, store, claims[0], "", dispNow))
		clock := newPolClock(dispNow.Add(time.Minute))
		polResend(t, ctx, store, clock, remote)
		clock.Add(2 * time.Hour)

		sender := &dispAnswer{out: turnframe.Dispatched{Kind: turnframe.DispatchCompleted}}
		d := turnframe.NewDispatcher(store, sender, turnframe.DispatchConfig{WorkerID: "w2"},
			turnframe.WithClock(clock.Now), turnframe.WithDestination("payments", remote))
		report, err := d.RunOnce(ctx, clock.Now())
		is.NoErr(err)
		is.Equal(report.Unknown, []turnframe.OutboxID{head.ID}) // withheld
		report, err = d.RunOnce(ctx, clock.Now())
		is.NoErr(err)
		is.Equal(len(report.Completed), 0) // the row behind it waits

		rec := turnframe.NewRecovery(store, turnframe.WithClock(clock.Now), turnframe.WithDestination("payments", remote))
		_, err = rec.Recover(ctx, turnframe.RecoveryScope{}, polNoTurns{t})
		is.NoErr(err)
		is.Equal(dispGet(t, store, head.ID).Status, turnframe.OutboxNeedsIntervention)
		_, err = d.RunOnce(ctx, clock.Now())
		is.NoErr(err)
		is.Equal(sender.count(next.ID), 0)                                   // still behind a person's decision
		is.Equal(dispGet(t, store, next.ID).Status, turnframe.OutboxPending) // waiting
		is.Equal(sender.count(head.ID), 0)                                   // and the head never sent blindly
	})
}

// whPadded serves a row's history behind a first page of MaxLimit evidence
// records, as a row that gathered that many late answers would have it:
// the policy's resend is on the second page.
type whPadded struct {
	turnframe.Store
	pages int
}

func (s *whPadded) History(ctx context.Context, subject turnframe.Subject, after int64, limit int) ([]turnframe.HistoryRecord, error) {
	s.pages++
	pad := int64(turnframe.MaxLimit)
	if after < pad {
		var page []turnframe.HistoryRecord
		for seq := after + 1; seq <= pad && len(page) < limit; seq++ {
			page = append(page, turnframe.HistoryRecord{Seq: seq, Subject: subject, Evidence: true, Actor: turnframe.ActorApp, Note: "late"})
		}
		return page, nil
	}
	real, err := s.Store.History(ctx, subject, after-pad, limit)
	for i := range real {
		real[i].Seq += pad
	}
	return real, err
}

// The history is read to its end: a resend recorded past the first page
// is withheld all the same.
func TestALapsedResendIsWithheldWhenItsHistorySpansPages(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		remote := turnframe.Remote{Deduplicates: time.Hour}
		row, clock := lapsedResend(t, store, remote)

		padded := &whPadded{Store: store}
		sender := &dispAnswer{out: turnframe.Dispatched{Kind: turnframe.DispatchCompleted}}
		report, err := turnframe.NewDispatcher(padded, sender, turnframe.DispatchConfig{WorkerID: "w2"},
			turnframe.WithClock(clock.Now), turnframe.WithDestination("payments", remote)).RunOnce(ctx, clock.Now())
		is.NoErr(err)
		is.Equal(sender.count(row.ID), 0) // not sent blindly
		is.Equal(report.Unknown, []turnframe.OutboxID{row.ID})
		is.Equal(padded.pages, 2) // the second page read, and no more
	})
}
