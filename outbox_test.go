package turnframe_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

var dispNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// dispEnqueue commits one command of a new turn of account, admitted under
// key, with msgs as its outbox rows, and returns the rows as enqueued.
func dispEnqueue(t *testing.T, store turnframe.Store, account turnframe.AccountID, key turnframe.IdempotencyKey, msgs ...turnframe.OutboxMessage) []turnframe.OutboxEntry {
	t.Helper()
	ctx := context.Background()
	ids := turnframe.NewIDGenerator()
	turn, attempt := ids.TurnID(dispNow), ids.AttemptID(dispNow)
	_, err := store.Apply(ctx, turnframe.Write{Account: account, Turn: turn, Now: dispNow,
		Begin:  &turnframe.StoredTurn{Account: account, ID: turn, Conversation: ids.ConversationID(dispNow), Text: "pay"},
		Admit:  []turnframe.Command{{Key: key, Case: turnframe.CaseKey("case/" + key), Name: "pay"}},
		Settle: []turnframe.Settlement{{Key: key, To: turnframe.JournalExecuting, Attempt: attempt, Lease: time.Minute}},
	})
	if err != nil {
		t.Fatalf("begin and execute %q: %v", key, err)
	}
	applied, err := store.Apply(ctx, turnframe.Write{Account: account, Turn: turn, Now: dispNow,
		Settle: []turnframe.Settlement{{Key: key, To: turnframe.JournalCommitted, Attempt: attempt}},
		Outbox: msgs,
	})
	if err != nil {
		t.Fatalf("commit %q: %v", key, err)
	}
	return applied.Outbox
}

// dispMessages returns n messages to destination, payloads "0", "1", ….
func dispMessages(n int, destination, orderKey string) []turnframe.OutboxMessage {
	msgs := make([]turnframe.OutboxMessage, n)
	for i := range msgs {
		msgs[i] = turnframe.OutboxMessage{Destination: destination, Payload: []byte(fmt.Sprint(i)), OrderKey: orderKey}
	}
	return msgs
}

func dispGet(t *testing.T, store turnframe.Store, id turnframe.OutboxID) turnframe.OutboxRecord {
	t.Helper()
	rec, err := store.GetOutbox(context.Background(), id)
	if err != nil {
		t.Fatalf("get outbox row %v: %v", id, err)
	}
	return rec
}

// dispAnswer is a sender that answers out to every send and counts sends per
// row.
type dispAnswer struct {
	out   turnframe.Dispatched
	mu    sync.Mutex
	sends map[turnframe.OutboxID]int
	order []turnframe.IdempotencyKey
}

func (s *dispAnswer) Send(_ context.Context, e turnframe.OutboxEntry) turnframe.Dispatched {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sends == nil {
		s.sends = make(map[turnframe.OutboxID]int)
	}
	s.sends[e.ID]++
	s.order = append(s.order, e.Key)
	return s.out
}

func (s *dispAnswer) count(id turnframe.OutboxID) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sends[id]
}

// dispLog is a buffer a logger may write to from several goroutines.
type dispLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *dispLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *dispLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func dispLogger(l *dispLog) *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func TestDispatcherSettlesEachOutcome(t *testing.T) {
	tests := []struct {
		name       string
		out        turnframe.Dispatched
		status     turnframe.OutboxStatus
		listed     func(turnframe.DispatchReport) []turnframe.OutboxID
		signal     turnframe.Signal
		lastCode   string
		remoteRef  string
		dueInitial bool // due again after the initial backoff
	}{
		{"completed rows are completed with the remote's reference and the sender's code",
			turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200", RemoteRef: "ch_1"},
			turnframe.OutboxCompleted, func(r turnframe.DispatchReport) []turnframe.OutboxID { return r.Completed },
			turnframe.SignalOutboxCompleted, "http.200", "ch_1", false},
		{"retryable rows are pending again after the backoff, keeping the code",
			turnframe.Dispatched{Kind: turnframe.DispatchRetryable, Code: "http.503"},
			turnframe.OutboxPending, func(r turnframe.DispatchReport) []turnframe.OutboxID { return r.Retried },
			turnframe.SignalOutboxRetried, "http.503", "", true},
		{"permanent rows are failed with the code",
			turnframe.Dispatched{Kind: turnframe.DispatchPermanent, Code: "http.422"},
			turnframe.OutboxFailed, func(r turnframe.DispatchReport) []turnframe.OutboxID { return r.Failed },
			turnframe.SignalOutboxFailed, "http.422", "", false},
		{"unknown rows are outcome unknown with the remote's reference and the sender's code",
			turnframe.Dispatched{Kind: turnframe.DispatchUnknown, Code: "http.504", RemoteRef: "req-9"},
			turnframe.OutboxOutcomeUnknown, func(r turnframe.DispatchReport) []turnframe.OutboxID { return r.Unknown },
			turnframe.SignalExternalOutcomeUnknown, "http.504", "req-9", false},
		{"a sender that answers nothing is unknown",
			turnframe.Dispatched{},
			turnframe.OutboxOutcomeUnknown, func(r turnframe.DispatchReport) []turnframe.OutboxID { return r.Unknown },
			turnframe.SignalExternalOutcomeUnknown, "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				ctx := context.Background()
				rows := dispEnqueue(t, store, "acme", "k1", turnframe.OutboxMessage{Destination: "payments", Payload: []byte("p")})
				sender := &dispAnswer{out: tt.out}
				signals := &recorder{}
				d := turnframe.NewDispatcher(store, sender, turnframe.DefaultDispatchConfig("w1"), turnframe.WithObserver(signals))

				report, err := d.RunOnce(ctx, dispNow)
				is.NoErr(err)                                                 // run
				is.Equal(report.Claimed(), 1)                                 // one row claimed
				is.Equal(tt.listed(report), []turnframe.OutboxID{rows[0].ID}) // listed under its outcome
				rec := dispGet(t, store, rows[0].ID)
				is.Equal(rec.Status, tt.status)       // settled as classified
				is.Equal(rec.LastCode, tt.lastCode)   // code kept
				is.Equal(rec.RemoteRef, tt.remoteRef) // reference kept
				is.Equal(rec.Attempts, 1)             // one attempt
				if tt.dueInitial {
					is.Equal(rec.DueAt, dispNow.Add(time.Second)) // due after the initial backoff
				}
				is.Equal(signals.count(turnframe.SignalOutboxClaimed), 1)   // claim observed
				is.Equal(signals.count(turnframe.SignalExternalLatency), 1) // send timed
				is.Equal(signals.labels(turnframe.SignalExternalLatency)[0],
					turnframe.Labels{Destination: "payments", Outcome: tt.out.Kind.String()}) // latency labelled by outcome
				is.Equal(signals.count(tt.signal), 1) // settlement observed
				if tt.signal != turnframe.SignalOutboxCompleted {
					is.Equal(signals.labels(tt.signal)[0],
						turnframe.Labels{Destination: "payments", Outcome: tt.lastCode}) // labelled by the code it was settled with
				}

				// Much later, only a retryable row is sent again: an
				// unknown one waits for reconciliation (I15).
				later, err := d.RunOnce(ctx, dispNow.Add(time.Hour))
				is.NoErr(err) // later run
				if tt.status == turnframe.OutboxPending {
					is.Equal(sender.count(rows[0].ID), 2) // retried
				} else {
					is.True(later.IsEmpty())              // nothing more to send
					is.Equal(sender.count(rows[0].ID), 1) // sent once, ever
				}
			})
		})
	}
}

func TestDispatcherRecordsASendPastItsTimeoutAsUnknown(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		rows := dispEnqueue(t, store, "acme", "k1", turnframe.OutboxMessage{Destination: "payments"})
		release := make(chan struct{})
		t.Cleanup(func() { close(release) })
		// It ignores its context and would answer Completed, too late.
		stuck := turnframe.SenderFunc(func(context.Context, turnframe.OutboxEntry) turnframe.Dispatched {
			<-release
			return turnframe.Dispatched{Kind: turnframe.DispatchCompleted}
		})
		cfg := turnframe.DefaultDispatchConfig("w1")
		cfg.SendTimeout = 10 * time.Millisecond
		signals := &recorder{}
		d := turnframe.NewDispatcher(store, stuck, cfg, turnframe.WithObserver(signals))

		report, err := d.RunOnce(context.Background(), dispNow)
		is.NoErr(err)                                                                   // run returns
		is.Equal(report.Unknown, []turnframe.OutboxID{rows[0].ID})                      // unknown, not retried
		is.Equal(dispGet(t, store, rows[0].ID).Status, turnframe.OutboxOutcomeUnknown)  // stored unknown
		is.Equal(dispGet(t, store, rows[0].ID).LastCode, turnframe.CodeSendTimeout)     // saying why
		is.Equal(signals.labels(turnframe.SignalExternalLatency)[0].Outcome, "unknown") // a timed-out send is timed too
	})
}

func TestDispatcherFailsARowWhoseAttemptsAreSpent(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		rows := dispEnqueue(t, store, "acme", "k1", turnframe.OutboxMessage{Destination: "payments"})
		sender := &dispAnswer{out: turnframe.Dispatched{Kind: turnframe.DispatchRetryable, Code: "remote.busy"}}
		cfg := turnframe.DefaultDispatchConfig("w1")
		cfg.MaxAttempts = 3
		d := turnframe.NewDispatcher(store, sender, cfg)

		now := dispNow
		for _, backoff := range []time.Duration{time.Second, 4 * time.Second} { // the defaults: 1 s, then ×4
			report, err := d.RunOnce(ctx, now)
			is.NoErr(err)                                              // run
			is.Equal(report.Retried, []turnframe.OutboxID{rows[0].ID}) // retried while attempts remain
			rec := dispGet(t, store, rows[0].ID)
			is.Equal(rec.DueAt, now.Add(backoff)) // due after the backoff of this attempt
			is.Equal(rec.LastCode, "remote.busy") // the sender's code
			now = rec.DueAt
		}
		report, err := d.RunOnce(ctx, now)
		is.NoErr(err)                                             // last run
		is.Equal(report.Failed, []turnframe.OutboxID{rows[0].ID}) // failed
		rec := dispGet(t, store, rows[0].ID)
		is.Equal(rec.Status, turnframe.OutboxFailed)                    // stored failed
		is.Equal(rec.LastCode, turnframe.CodeAttemptsExhausted)         // with the dispatcher's code
		is.Equal(rec.LastCode, "turnframe.dispatch.attempts_exhausted") // which is stable
		is.Equal(sender.count(rows[0].ID), 3)                           // three attempts
	})
}

func TestBackoffFor(t *testing.T) {
	defaults := turnframe.DefaultDispatchConfig("w")
	huge := turnframe.DispatchConfig{InitialBackoff: 1 << 40, MaxBackoff: math.MaxInt64, BackoffMultiplier: 1 << 20}
	tests := []struct {
		name    string
		cfg     turnframe.DispatchConfig
		attempt int
		want    time.Duration
	}{
		{"attempt 0 waits the initial backoff", defaults, 0, time.Second},
		{"attempt 1 waits the initial backoff", defaults, 1, time.Second},
		{"attempt 2 waits initial × 4", defaults, 2, 4 * time.Second},
		{"attempt 3 waits initial × 16", defaults, 3, 16 * time.Second},
		{"attempt 4 is capped", defaults, 4, time.Minute},
		{"attempt 9 is capped", defaults, 9, time.Minute},
		{"attempt MaxInt32 is capped", defaults, math.MaxInt32, time.Minute},
		{"attempt MaxInt is capped", defaults, math.MaxInt, time.Minute},
		{"a negative attempt waits the initial backoff", defaults, -3, time.Second},
		{"zero fields take the defaults", turnframe.DispatchConfig{}, 3, 16 * time.Second},
		{"a multiplier of 1 keeps the initial backoff", turnframe.DispatchConfig{BackoffMultiplier: 1}, 7, time.Second},
		{"an initial backoff above the cap is capped from attempt 2",
			turnframe.DispatchConfig{InitialBackoff: time.Hour, MaxBackoff: time.Minute}, 2, time.Minute},
		{"overflow saturates at the cap", huge, 5, math.MaxInt64},
		{"overflow saturates at the cap for a huge attempt", huge, math.MaxInt, math.MaxInt64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			is.Equal(tt.cfg.BackoffFor(tt.attempt), tt.want) // backoff
		})
	}
}

func TestDispatcherRecordsAPanickingSenderAsUnknown(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		rows := dispEnqueue(t, store, "acme", "k1", turnframe.OutboxMessage{Destination: "payments"})
		var log dispLog
		panicky := turnframe.SenderFunc(func(context.Context, turnframe.OutboxEntry) turnframe.Dispatched {
			panic("card network exploded")
		})
		d := turnframe.NewDispatcher(store, panicky, turnframe.DefaultDispatchConfig("w1"), turnframe.WithLogger(dispLogger(&log)))

		report, err := d.RunOnce(context.Background(), dispNow)
		is.NoErr(err)                                                                  // the panic does not escape
		is.Equal(report.Unknown, []turnframe.OutboxID{rows[0].ID})                     // unknown: it may have left
		is.Equal(dispGet(t, store, rows[0].ID).Status, turnframe.OutboxOutcomeUnknown) // stored unknown
		is.True(strings.Contains(log.String(), "card network exploded"))               // the panic is logged
		is.True(strings.Contains(log.String(), rows[0].ID.String()))                   // with the row
	})
}

func TestDispatcherReportsAClaimLostMidSendAsUnsettled(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		rows := dispEnqueue(t, store, "acme", "k1", turnframe.OutboxMessage{Destination: "payments"})
		started, proceed := make(chan struct{}), make(chan struct{})
		slow := turnframe.SenderFunc(func(context.Context, turnframe.OutboxEntry) turnframe.Dispatched {
			close(started)
			<-proceed
			return turnframe.Dispatched{Kind: turnframe.DispatchCompleted, RemoteRef: "from-a"}
		})
		d := turnframe.NewDispatcher(store, slow, turnframe.DefaultDispatchConfig("a"))
		type result struct {
			report turnframe.DispatchReport
			err    error
		}
		done := make(chan result, 1)
		go func() {
			report, err := d.RunOnce(ctx, dispNow)
			done <- result{report, err}
		}()

		<-started
		// a's lease ended as far as recovery can tell: the row is expired to
		// outcome unknown and, no Remote declared for payments, put back to
		// send again under its key.
		r := turnframe.NewRecovery(store, turnframe.WithClock(func() time.Time { return dispNow.Add(time.Minute) }))
		recovered, err := r.Recover(ctx, turnframe.RecoveryScope{}, &recHandler{})
		is.NoErr(err)                                                 // recover
		is.Equal(recovered.Expired, []turnframe.OutboxID{rows[0].ID}) // a's claim expired
		is.Equal(policyFor(t, recovered, turnframe.OutboxSubject("acme", rows[0].ID)).Outcome, turnframe.PolicyResent)
		claims, err := store.ClaimDue(ctx, dispNow.Add(time.Minute), 10, "b", time.Minute)
		is.NoErr(err)            // b claims
		is.Equal(len(claims), 1) // the row
		close(proceed)
		got := <-done

		is.NoErr(got.err)                                                // not an error of RunOnce
		is.Equal(got.report.Unsettled, []turnframe.OutboxID{rows[0].ID}) // unsettled
		is.Equal(got.report.Claimed(), 1)                                // and nothing else
		rec := dispGet(t, store, rows[0].ID)
		is.Equal(rec.Status, turnframe.OutboxDispatching) // b's claim untouched
		is.Equal(rec.ClaimedBy, "b")                      // still b's
		is.Equal(rec.Attempts, 2)                         // at b's attempt
		evidence := evidenceOf(t, store, turnframe.OutboxSubject("acme", rows[0].ID), turnframe.CodeLateAnswer)
		is.Equal(len(evidence), 1)                                                                   // a's answer is kept as evidence
		is.Equal(evidence[0].Actor, turnframe.WorkerActor("a"))                                      // a's
		is.Equal(evidence[0].RemoteRef, "from-a")                                                    // with what the remote said
		is.Equal(evidence[0].To, "dispatching")                                                      // moving nothing
		is.NoErr(turnframe.CompleteClaim(ctx, store, claims[0], "from-b", dispNow.Add(time.Minute))) // b settles
		is.Equal(dispGet(t, store, rows[0].ID).RemoteRef, "from-b")                                  // with its own reference
	})
}

func TestDispatchersNeverSendTheSameRow(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		const n = 240
		var rows []turnframe.OutboxEntry
		for i := range 3 {
			rows = append(rows, dispEnqueue(t, store, "acme", turnframe.IdempotencyKey(fmt.Sprint("k", i)), dispMessages(n/3, "payments", "")...)...)
		}
		sender := &dispAnswer{out: turnframe.Dispatched{Kind: turnframe.DispatchCompleted}}
		var wg sync.WaitGroup
		claimed := make([]int, 2)
		errs := make([]error, 2)
		for w := range 2 {
			cfg := turnframe.DefaultDispatchConfig(fmt.Sprint("w", w))
			cfg.BatchSize, cfg.Concurrency = 7, 8
			d := turnframe.NewDispatcher(store, sender, cfg)
			wg.Go(func() {
				for {
					report, err := d.RunOnce(ctx, dispNow)
					if err != nil {
						errs[w] = err
						return
					}
					if report.IsEmpty() {
						return
					}
					claimed[w] += len(report.Completed)
				}
			})
		}
		wg.Wait()
		is.NoErr(errors.Join(errs...))     // every run
		is.Equal(claimed[0]+claimed[1], n) // every row completed once between them
		for _, r := range rows {
			is.Equal(sender.count(r.ID), 1) // sent exactly once
		}
		done, err := store.ListOutbox(ctx, turnframe.OutboxFilter{Status: turnframe.OutboxCompleted, Limit: 1000})
		is.NoErr(err)          // list
		is.Equal(len(done), n) // all completed
	})
}

func TestOrderedDeliveryHoldsAcrossSweeps(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		rows := dispEnqueue(t, store, "acme", "k1", dispMessages(3, "payments", "order-1")...)
		var mu sync.Mutex
		var sent []turnframe.IdempotencyKey
		sender := turnframe.SenderFunc(func(_ context.Context, e turnframe.OutboxEntry) turnframe.Dispatched {
			mu.Lock()
			defer mu.Unlock()
			sent = append(sent, e.Key)
			if e.ID == rows[0].ID && e.Attempts == 1 {
				return turnframe.Dispatched{Kind: turnframe.DispatchRetryable, Code: "remote.busy"}
			}
			return turnframe.Dispatched{Kind: turnframe.DispatchCompleted}
		})
		cfg := turnframe.DefaultDispatchConfig("w1")
		cfg.Concurrency = 8
		d := turnframe.NewDispatcher(store, sender, cfg)

		now := dispNow
		for sweep := 0; sweep < 10; sweep++ {
			report, err := d.RunOnce(ctx, now)
			is.NoErr(err)                  // sweep
			is.True(report.Claimed() <= 1) // one row of the key at a time
			now = now.Add(time.Second)
		}
		is.Equal(sent, []turnframe.IdempotencyKey{"k1~1", "k1~1", "k1~2", "k1~3"}) // enqueue order, the retry first
		for _, r := range rows {
			is.Equal(dispGet(t, store, r.ID).Status, turnframe.OutboxCompleted) // all delivered
		}
	})
}

// Settle resolves a row whose outcome is unknown by the verdict a person
// or the application found: in one transaction, signalled, and recorded in
// the audit trail with who decided and why. Only a resend is sent again.
func TestSettleResolvesAnUnknownRow(t *testing.T) {
	tests := []struct {
		name      string
		decision  turnframe.Decision
		status    turnframe.OutboxStatus
		code      string // the row's last code after
		remoteRef string // the row's reference after
		sends     int    // sends of the row in all, a later sweep included
	}{
		{"completed completes the row with the remote's reference",
			turnframe.Decision{Verdict: turnframe.VerdictCompleted, RemoteRef: "ch_9"}, turnframe.OutboxCompleted, "", "ch_9", 1},
		{"failed fails the row with the code",
			turnframe.Decision{Verdict: turnframe.VerdictFailed, Code: "remote.declined"}, turnframe.OutboxFailed, "remote.declined", "req-1", 1},
		{"resend queues the row again at once",
			turnframe.Decision{Verdict: turnframe.VerdictResend}, turnframe.OutboxPending, "", "req-1", 2},
		{"escalate hands the row to a person",
			turnframe.Decision{Verdict: turnframe.VerdictEscalate, Code: "ops.ticket"}, turnframe.OutboxNeedsIntervention, "ops.ticket", "req-1", 1},
		{"unresolved leaves the row unknown",
			turnframe.Decision{Verdict: turnframe.VerdictUnresolved}, turnframe.OutboxOutcomeUnknown, "http.504", "req-1", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				ctx := context.Background()
				rows := dispEnqueue(t, store, "acme", "k1", turnframe.OutboxMessage{Destination: "payments"})
				subject := turnframe.OutboxSubject("acme", rows[0].ID)
				sender := &dispAnswer{out: turnframe.Dispatched{Kind: turnframe.DispatchUnknown, Code: "http.504", RemoteRef: "req-1"}}
				d := turnframe.NewDispatcher(store, sender, turnframe.DefaultDispatchConfig("w1"))
				_, err := d.RunOnce(ctx, dispNow)
				is.NoErr(err) // send, unknown
				unknownTrail := histLines(t, store, subject)

				later := dispNow.Add(time.Hour)
				signals := &recorder{}
				r := turnframe.NewRecovery(store, turnframe.WithObserver(signals), turnframe.WithClock(func() time.Time { return later }))
				decision := tt.decision
				decision.Actor, decision.Note = "operator:bob", "looked it up"
				is.NoErr(r.Settle(ctx, subject, decision)) // settle
				rec := dispGet(t, store, rows[0].ID)
				is.Equal(rec.Status, tt.status)       // settled by verdict
				is.Equal(rec.LastCode, tt.code)       // the decision's code
				is.Equal(rec.RemoteRef, tt.remoteRef) // the decision's reference, or the one it had
				trail := histOf(t, store, subject)
				if tt.status == turnframe.OutboxOutcomeUnknown {
					is.Equal(histLines(t, store, subject), unknownTrail)           // nothing recorded
					is.Equal(signals.count(turnframe.SignalExternalReconciled), 0) // nor signalled
				} else {
					last := trail[len(trail)-1]
					is.Equal(histLine(last), strings.TrimSpace("outcome_unknown>"+tt.status.String()+" operator:bob "+tt.code)) // recorded
					is.Equal(last.Note, "looked it up")                                                                         // with why
					is.Equal(last.At, later)                                                                                    // and when
					want := []turnframe.Labels{{Destination: "payments", Outcome: tt.decision.Verdict.String()}}
					if tt.decision.Verdict == turnframe.VerdictEscalate {
						want = nil // escalated, it is still unknown: no reconciliation
					}
					is.Equal(signals.labels(turnframe.SignalExternalReconciled), want) // signalled by verdict
				}

				// Only a resend is sent again, and only once it is due.
				_, err = d.RunOnce(ctx, later)
				is.NoErr(err)                                // sweep after the settlement
				is.Equal(sender.count(rows[0].ID), tt.sends) // sends
			})
		})
	}
}

// Settle moves only a row whose outcome is unknown, and never another
// tenant's; Recover asks a Verifier about unknown rows only.
func TestSettleLeavesKnownRowsAlone(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		rows := dispEnqueue(t, store, "acme", "k1", turnframe.OutboxMessage{Destination: "payments"})
		subject := turnframe.OutboxSubject("acme", rows[0].ID)
		sender := &dispAnswer{out: turnframe.Dispatched{Kind: turnframe.DispatchCompleted, RemoteRef: "ch_1"}}
		d := turnframe.NewDispatcher(store, sender, turnframe.DefaultDispatchConfig("w1"))
		_, err := d.RunOnce(ctx, dispNow)
		is.NoErr(err) // send, completed
		before, trail := dispGet(t, store, rows[0].ID), histLines(t, store, subject)

		asked := false
		signals := &recorder{}
		r := turnframe.NewRecovery(store, turnframe.WithObserver(signals), turnframe.WithClock(func() time.Time { return dispNow.Add(time.Hour) }),
			turnframe.WithDestination("payments", turnframe.Remote{Verifier: turnframe.VerifierFunc(func(context.Context, turnframe.Uncertain) turnframe.Verification {
				asked = true
				return turnframe.Verification{Found: turnframe.FoundNotHappened}
			})}))
		for _, v := range []turnframe.Verdict{turnframe.VerdictCompleted, turnframe.VerdictFailed, turnframe.VerdictResend, turnframe.VerdictEscalate} {
			err = r.Settle(ctx, subject, turnframe.Decision{Verdict: v})
			is.True(errors.Is(err, turnframe.ErrConflict)) // a known outcome is not settled again
		}
		report, err := r.Recover(ctx, turnframe.RecoveryScope{}, &recHandler{})
		is.NoErr(err)                                                  // recover
		is.Equal(len(report.Policy), 0)                                // meets no unknown
		is.True(!asked)                                                // the verifier was not asked
		is.Equal(dispGet(t, store, rows[0].ID), before)                // the row is untouched
		is.Equal(histLines(t, store, subject), trail)                  // and so is its history
		is.Equal(signals.count(turnframe.SignalExternalReconciled), 0) // nothing reconciled

		missing := turnframe.OutboxSubject("acme", turnframe.NewIDGenerator().OutboxID(dispNow))
		err = r.Settle(ctx, missing, turnframe.Decision{Verdict: turnframe.VerdictCompleted})
		is.True(errors.Is(err, turnframe.ErrNotFound)) // a missing row is ErrNotFound
		err = r.Settle(ctx, turnframe.OutboxSubject("globex", rows[0].ID), turnframe.Decision{Verdict: turnframe.VerdictCompleted})
		is.True(errors.Is(err, turnframe.ErrNotFound)) // and so is another tenant's
	})
}

// A Verifier that cannot tell — it says so, panics, answers a finding that
// is none, or answers only after its deadline — is one lookup that could
// not tell: recorded as evidence, the row left unknown and never sent
// again, asked again only after a backoff, and after the last lookup
// allowed the row goes to a person.
func TestRecoverCountsAVerifierThatCannotTellAsUnsure(t *testing.T) {
	tests := []struct {
		name    string
		timeout time.Duration
		verify  func(ctx context.Context) turnframe.Verification
		why     string // in the evidence's note
		logged  string // in the log at error level, if any
		late    bool   // the answer comes after the deadline
	}{
		{"it says it cannot tell", time.Minute, func(context.Context) turnframe.Verification {
			return turnframe.Verification{Found: turnframe.FoundUnsure, Note: "ledger lagging"}
		}, "ledger lagging", "", false},
		{"it panics", time.Minute, func(context.Context) turnframe.Verification {
			panic("ledger offline")
		}, "ledger offline", "ledger offline", false},
		{"it answers a finding that is none", time.Minute, func(context.Context) turnframe.Verification {
			return turnframe.Verification{Found: turnframe.Finding(7)}
		}, "finding 7", "level=ERROR", false},
		{"it answers after its deadline", time.Millisecond, func(ctx context.Context) turnframe.Verification {
			<-ctx.Done()
			return turnframe.Verification{Found: turnframe.FoundHappened}
		}, "in time", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				ctx := context.Background()
				rows := dispEnqueue(t, store, "acme", "k1", turnframe.OutboxMessage{Destination: "payments"})
				subject := turnframe.OutboxSubject("acme", rows[0].ID)
				sender := &dispAnswer{out: turnframe.Dispatched{Kind: turnframe.DispatchUnknown}}
				d := turnframe.NewDispatcher(store, sender, turnframe.DefaultDispatchConfig("w1"))
				_, err := d.RunOnce(ctx, dispNow)
				is.NoErr(err) // send, unknown

				var log dispLog
				var lookups atomic.Int64
				signals := &recorder{}
				lateAnswers := signals.notify(turnframe.SignalLateAnswer)
				clock := newStepClock(dispNow.Add(time.Minute))
				r := turnframe.NewRecovery(store, turnframe.WithClock(clock.read), turnframe.WithObserver(signals),
					turnframe.WithLogger(dispLogger(&log)),
					turnframe.WithDestination("payments", turnframe.Remote{
						VerifyTries: 2, VerifyBackoff: time.Second, VerifyTimeout: tt.timeout,
						Verifier: turnframe.VerifierFunc(func(ctx context.Context, _ turnframe.Uncertain) turnframe.Verification {
							lookups.Add(1)
							return tt.verify(ctx)
						}),
					}))
				recoverOnce := func() turnframe.PolicyResult {
					t.Helper()
					report, err := r.Recover(ctx, turnframe.RecoveryScope{}, &recHandler{})
					is.NoErr(err) // recover
					return policyFor(t, report, subject)
				}

				first := recoverOnce()
				is.Equal(first.Outcome, turnframe.PolicyUnsure)       // the lookup could not tell
				is.Equal(first.NextAt, clock.read().Add(time.Second)) // and is tried again after the backoff
				if tt.late {
					is.Equal(awaitLabels(t, lateAnswers, "late lookup").Outcome, "recorded") // its late answer kept as evidence
				}
				is.Equal(dispGet(t, store, rows[0].ID).Status, turnframe.OutboxOutcomeUnknown) // still unknown
				unsure := evidenceOf(t, store, subject, turnframe.CodeVerifyUnsure)
				is.Equal(len(unsure), 1)                          // recorded as evidence
				is.Equal(unsure[0].Actor, turnframe.ActorPolicy)  // by the policy
				is.True(strings.Contains(unsure[0].Note, tt.why)) // saying why
				if tt.logged != "" {
					is.True(strings.Contains(log.String(), "level=ERROR")) // logged as an error
					is.True(strings.Contains(log.String(), tt.logged))     // with what went wrong
				}

				is.Equal(recoverOnce().Outcome, turnframe.PolicyWaiting) // within the backoff
				is.Equal(lookups.Load(), int64(1))                       // nobody is asked

				clock.set(clock.read().Add(time.Hour))
				last := recoverOnce()
				if tt.late {
					is.Equal(awaitLabels(t, lateAnswers, "late lookup").Outcome, "recorded") // the second late answer too
				}
				is.Equal(last.Outcome, turnframe.PolicyEscalated)  // the last lookup allowed could not tell either
				is.Equal(last.Code, turnframe.CodeVerifyExhausted) // saying so
				is.Equal(lookups.Load(), int64(2))                 // VerifyTries lookups in all
				rec := dispGet(t, store, rows[0].ID)
				is.Equal(rec.Status, turnframe.OutboxNeedsIntervention) // a person decides
				is.Equal(rec.LastCode, turnframe.CodeVerifyExhausted)
				var moves []string
				for _, h := range histOf(t, store, subject) {
					if !h.Evidence {
						moves = append(moves, histLine(h))
					}
				}
				is.Equal(moves[len(moves)-1], "outcome_unknown>needs_intervention policy "+turnframe.CodeVerifyExhausted) // the escalation recorded
				is.Equal(len(evidenceOf(t, store, subject, turnframe.CodeVerifyUnsure)), 2)                               // each lookup recorded

				_, err = d.RunOnce(ctx, clock.read().Add(time.Hour))
				is.NoErr(err)                         // a later sweep
				is.Equal(sender.count(rows[0].ID), 1) // never sends it again (I15)
			})
		})
	}
}

// dispSpyStore records the batches the dispatcher settles, and can hold the
// first Settle call until gate is closed.
type dispSpyStore struct {
	turnframe.Store
	gate    chan struct{} // nil: never hold
	mu      sync.Mutex
	calls   int
	batches [][]turnframe.OutboxID
	settled chan turnframe.OutboxID // every id settled, after its Settle returned
}

func (s *dispSpyStore) Settle(ctx context.Context, settlements []turnframe.OutboxSettlement) ([]error, error) {
	s.mu.Lock()
	s.calls++
	first := s.calls == 1
	var ids []turnframe.OutboxID
	for _, st := range settlements {
		ids = append(ids, st.Claim.ID)
	}
	s.batches = append(s.batches, ids)
	s.mu.Unlock()
	if first && s.gate != nil {
		<-s.gate
	}
	results, err := s.Store.Settle(ctx, settlements)
	for _, id := range ids {
		if s.settled != nil {
			s.settled <- id
		}
	}
	return results, err
}

func TestGroupCommitKeepsEachRowsResult(t *testing.T) {
	eachStore(t, func(t *testing.T, inner turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		rows := dispEnqueue(t, inner, "acme", "k1", dispMessages(4, "payments", "")...)
		store := &dispSpyStore{Store: inner, gate: make(chan struct{})}
		sender := turnframe.SenderFunc(func(_ context.Context, e turnframe.OutboxEntry) turnframe.Dispatched {
			switch e.ID {
			case rows[1].ID:
				// Someone settles the row under our claim first: our own
				// settlement of it will find the claim gone.
				claim := turnframe.Claim{OutboxEntry: e, Worker: "w1", ClaimedAt: dispNow}
				if err := turnframe.FailClaim(ctx, inner, claim, "operator.cancelled", dispNow); err != nil {
					t.Errorf("settle under the dispatcher's claim: %v", err)
				}
			case rows[3].ID:
				// Rows 2 and 3 are queued by now: let the first settlement through.
				close(store.gate)
			}
			return turnframe.Dispatched{Kind: turnframe.DispatchCompleted}
		})
		d := turnframe.NewDispatcher(store, sender, turnframe.DefaultDispatchConfig("w1"))

		report, err := d.RunOnce(ctx, dispNow)
		is.NoErr(err)                                                                        // run
		is.Equal(report.Unsettled, []turnframe.OutboxID{rows[1].ID})                         // only the lost claim is refused
		is.Equal(report.Completed, []turnframe.OutboxID{rows[0].ID, rows[2].ID, rows[3].ID}) // the others settle, in claim order
		shared := false
		for _, b := range store.batches {
			if slices.Contains(b, rows[1].ID) && len(b) > 1 {
				shared = true
			}
		}
		is.True(shared)                                                        // the lost claim shared a transaction with another row
		is.True(len(store.batches) < len(rows))                                // fewer transactions than rows
		is.Equal(dispGet(t, inner, rows[1].ID).LastCode, "operator.cancelled") // the other settlement stands
	})
}

func TestDispatcherWritesALoneSettlementAtOnce(t *testing.T) {
	eachStore(t, func(t *testing.T, inner turnframe.Store) {
		is := is.New(t)
		rows := dispEnqueue(t, inner, "acme", "k1", dispMessages(2, "payments", "")...)
		store := &dispSpyStore{Store: inner, settled: make(chan turnframe.OutboxID, 2)}
		sender := turnframe.SenderFunc(func(_ context.Context, e turnframe.OutboxEntry) turnframe.Dispatched {
			if e.ID == rows[1].ID {
				// The second send waits until the first row is written:
				// a settler that waited for company would never get there.
				if got := <-store.settled; got != rows[0].ID {
					t.Errorf("settled %v first, want %v", got, rows[0].ID)
				}
			}
			return turnframe.Dispatched{Kind: turnframe.DispatchCompleted}
		})
		d := turnframe.NewDispatcher(store, sender, turnframe.DefaultDispatchConfig("w1"))
		report, err := d.RunOnce(context.Background(), dispNow)
		is.NoErr(err)                      // run
		is.Equal(len(report.Completed), 2) // both completed
		is.Equal(len(store.batches), 2)    // one transaction each
	})
}

func TestDispatcherDoesNotSendOnceItsContextEnds(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		rows := dispEnqueue(t, store, "acme", "k1", dispMessages(2, "payments", "")...)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		sends := 0
		sender := turnframe.SenderFunc(func(context.Context, turnframe.OutboxEntry) turnframe.Dispatched {
			sends++
			return turnframe.Dispatched{Kind: turnframe.DispatchCompleted}
		})
		// The application shuts down right after the first send answered.
		shutdown := turnframe.ObserverFunc(func(s turnframe.Signal, _ turnframe.Labels, _ time.Duration) {
			if s == turnframe.SignalExternalLatency {
				cancel()
			}
		})
		d := turnframe.NewDispatcher(store, sender, turnframe.DefaultDispatchConfig("w1"), turnframe.WithObserver(shutdown))
		report, err := d.RunOnce(ctx, dispNow)
		is.NoErr(err)                                                // run
		is.Equal(sends, 1)                                           // the second row is not sent
		is.Equal(report.Completed, []turnframe.OutboxID{rows[0].ID}) // the first is still recorded
		is.Equal(report.Retried, []turnframe.OutboxID{rows[1].ID})   // the second is put back
		rec := dispGet(t, store, rows[1].ID)
		is.Equal(rec.Status, turnframe.OutboxPending) // pending
		is.Equal(rec.DueAt, dispNow)                  // due at once
		is.Equal(rec.LastCode, turnframe.CodeNotSent) // saying why
	})
}

func TestDispatcherReplacesCodesNoStoreKeeps(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		rows := dispEnqueue(t, store, "acme", "k1", turnframe.OutboxMessage{Destination: "payments"})
		sender := &dispAnswer{out: turnframe.Dispatched{Kind: turnframe.DispatchPermanent, Code: strings.Repeat("x", 300)}}
		d := turnframe.NewDispatcher(store, sender, turnframe.DefaultDispatchConfig("w1"))
		report, err := d.RunOnce(context.Background(), dispNow)
		is.NoErr(err)                                                               // run
		is.Equal(report.Failed, []turnframe.OutboxID{rows[0].ID})                   // still settled as classified
		is.Equal(dispGet(t, store, rows[0].ID).LastCode, turnframe.CodeInvalidCode) // with the replacement code
	})
}

func TestNewDispatcherPanicsOnProgrammerErrors(t *testing.T) {
	sender := &dispAnswer{}
	tests := []struct {
		name   string
		store  turnframe.OutboxStore
		sender turnframe.Sender
		cfg    turnframe.DispatchConfig
	}{
		{"a nil store", nil, sender, turnframe.DefaultDispatchConfig("w")},
		{"a nil sender", dispNoStore{}, nil, turnframe.DefaultDispatchConfig("w")},
		{"an empty worker id", dispNoStore{}, sender, turnframe.DispatchConfig{}},
		{"a worker id over 193 bytes", dispNoStore{}, sender, turnframe.DefaultDispatchConfig(strings.Repeat("w", 194))},
		{"a batch over MaxLimit", dispNoStore{}, sender, turnframe.DispatchConfig{WorkerID: "w", BatchSize: turnframe.MaxLimit + 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			defer func() {
				is.True(recover() != nil) // panicked
			}()
			turnframe.NewDispatcher(tt.store, tt.sender, tt.cfg)
		})
	}
}

// dispNoStore is an OutboxStore that is never called.
type dispNoStore struct{ turnframe.OutboxStore }

func TestDispatcherConfigFillsDefaults(t *testing.T) {
	is := is.New(t)
	d := turnframe.NewDispatcher(dispNoStore{}, &dispAnswer{}, turnframe.DispatchConfig{WorkerID: "w", Concurrency: 4})
	want := turnframe.DefaultDispatchConfig("w")
	want.Concurrency = 4
	is.Equal(d.Config(), want)                                                                                 // zero fields defaulted, set ones kept
	is.Equal(want.BatchSize, 16)                                                                               // batch
	is.Equal(want.SendTimeout, 30*time.Second)                                                                 // send timeout
	is.Equal([]time.Duration{want.InitialBackoff, want.MaxBackoff}, []time.Duration{time.Second, time.Minute}) // backoff
	is.Equal([]int{want.BackoffMultiplier, want.MaxAttempts}, []int{4, 5})                                     // growth and attempts
}

func TestDispatchReportAndKinds(t *testing.T) {
	is := is.New(t)
	var report turnframe.DispatchReport
	is.True(report.IsEmpty()) // empty
	id := turnframe.NewIDGenerator().OutboxID(dispNow)
	report.Completed = append(report.Completed, id)
	report.Unsettled = append(report.Unsettled, id)
	is.Equal(report.Claimed(), 2) // counts every list
	is.True(!report.IsEmpty())    // not empty
	names := []string{}
	for _, k := range []turnframe.DispatchKind{turnframe.DispatchCompleted, turnframe.DispatchRetryable, turnframe.DispatchPermanent, turnframe.DispatchUnknown} {
		names = append(names, k.String())
	}
	is.Equal(names, []string{"completed", "retryable", "permanent", "unknown"}) // snake case
	is.Equal(turnframe.Dispatched{}.Kind, turnframe.DispatchUnknown)            // the zero value is the cautious one
}

// Settle checks its input before it reads anything: the Recovery here is
// over a store that panics if called.
func TestSettleChecksItsInputFirst(t *testing.T) {
	row := turnframe.OutboxSubject("acme", turnframe.NewIDGenerator().OutboxID(dispNow))
	completed := turnframe.Decision{Verdict: turnframe.VerdictCompleted}
	tests := []struct {
		name     string
		subject  turnframe.Subject
		decision turnframe.Decision
	}{
		{"a verdict that is none", row, turnframe.Decision{Verdict: turnframe.Verdict(9)}},
		{"a code over 200 bytes", row, turnframe.Decision{Verdict: turnframe.VerdictFailed, Code: strings.Repeat("c", 201)}},
		{"a remote reference over 1024 bytes", row, turnframe.Decision{Verdict: turnframe.VerdictCompleted, RemoteRef: strings.Repeat("r", 1025)}},
		{"an actor with a control character", row, turnframe.Decision{Verdict: turnframe.VerdictCompleted, Actor: "operator:\nbob"}},
		{"an actor over 200 bytes", row, turnframe.Decision{Verdict: turnframe.VerdictCompleted, Actor: turnframe.Actor(strings.Repeat("a", 201))}},
		{"a note over 1024 bytes", row, turnframe.Decision{Verdict: turnframe.VerdictCompleted, Note: strings.Repeat("n", 1025)}},
		{"a subject without a kind", turnframe.Subject{Account: "acme", Ref: row.Ref}, completed},
		{"a subject without an account", turnframe.OutboxSubject("", turnframe.NewIDGenerator().OutboxID(dispNow)), completed},
		{"a subject without a reference", turnframe.JournalSubject("acme", ""), completed},
		{"a row reference that is not a row id", turnframe.Subject{Kind: turnframe.SubjectOutbox, Account: "acme", Ref: "k1"}, completed},
		{"a journal reference that is not a key", turnframe.JournalSubject("acme", "k1\x001"), completed}, // "k1~1" is one an earlier release admitted
		{"a turn, which has no outcome", turnframe.TurnSubject("acme", turnframe.NewIDGenerator().TurnID(dispNow)), completed},
		{"an unresolved verdict on a bad subject", turnframe.Subject{Account: "acme", Ref: "k1"}, turnframe.Decision{Verdict: turnframe.VerdictUnresolved}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			err := turnframe.NewRecovery(nopStoreForSweep{}).Settle(context.Background(), tt.subject, tt.decision)
			is.True(errors.Is(err, turnframe.ErrInvalid)) // refused before the store is read
			var ie *turnframe.InvalidError
			is.True(errors.As(err, &ie)) // naming the field
			is.True(ie.Field != "")
		})
	}
}

// TestARetryWaitCountsFromTheAnswer: a remote's Retry-After is counted from
// its answer, not from the claim: a send that took 30 s to answer "503,
// Retry-After: 10 s" is due 10 s after the answer, never before it came.
func TestARetryWaitCountsFromTheAnswer(t *testing.T) {
	for _, took := range []time.Duration{0, 30 * time.Second} {
		t.Run(took.String(), func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				row := dispEnqueue(t, store, rtAccount, "k1", turnframe.OutboxMessage{Destination: "payments"})[0]
				clock := newStepClock(dispNow)
				sender := turnframe.SenderFunc(func(context.Context, turnframe.OutboxEntry) turnframe.Dispatched {
					clock.set(dispNow.Add(took)) // the remote answers after took
					return turnframe.Dispatched{Kind: turnframe.DispatchRetryable, Code: "http.503", RetryAfter: 10 * time.Second}
				})
				d := turnframe.NewDispatcher(store, sender, turnframe.DispatchConfig{WorkerID: "w1", SendTimeout: time.Hour}, turnframe.WithClock(clock.read))
				_, err := d.RunOnce(context.Background(), dispNow)
				is.NoErr(err)
				got := dispGet(t, store, row.ID)
				is.Equal(got.Status, turnframe.OutboxPending)
				is.Equal(got.DueAt, dispNow.Add(took+10*time.Second)) // 10 s after the answer
			})
		})
	}
}

// TestASendersCodeCannotPassForTheLibrarys: a Sender that answers
// DispatchUnknown with a code of the library's own — here CodeLeaseEnded,
// which the policy reads as "the claim expired: sent again under its key,
// at least once" for an undeclared destination — must not get its unknown
// outcome resent. Codes beginning "turnframe." are the library's; a
// Sender's is replaced by CodeInvalidCode, and the unknown waits for Settle.
func TestASendersCodeCannotPassForTheLibrarys(t *testing.T) {
	for _, code := range []string{turnframe.CodeLeaseEnded, turnframe.CodeSendTimeout, "turnframe.anything"} {
		t.Run(code, func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				ctx := context.Background()
				rows := dispEnqueue(t, store, "acme", "k1", turnframe.OutboxMessage{Destination: "payments"})
				sender := &dispAnswer{out: turnframe.Dispatched{Kind: turnframe.DispatchUnknown, Code: code}}
				d := turnframe.NewDispatcher(store, sender, turnframe.DefaultDispatchConfig("w1"))
				_, err := d.RunOnce(ctx, dispNow)
				is.NoErr(err)
				got := dispGet(t, store, rows[0].ID)
				is.Equal(got.Status, turnframe.OutboxOutcomeUnknown) // the sender said: it may have left
				is.Equal(got.LastCode, turnframe.CodeInvalidCode)    // not the library's code

				later := dispNow.Add(time.Minute)
				_, err = turnframe.NewRecovery(store, turnframe.WithClock(func() time.Time { return later })).
					Recover(ctx, turnframe.RecoveryScope{}, &recHandler{})
				is.NoErr(err)
				_, err = d.RunOnce(ctx, later.Add(time.Minute))
				is.NoErr(err)
				is.Equal(sender.count(rows[0].ID), 1)                                          // never sent again blindly (I15)
				is.Equal(dispGet(t, store, rows[0].ID).Status, turnframe.OutboxOutcomeUnknown) // it waits for Settle
			})
		})
	}
}

// SenderCode is the one rule for the code a Sender's answer keeps: the row
// is settled with it, and an adapter reporting the send reports it. The
// code it replaces is logged, cut to what a store keeps: a Sender's 1 MiB
// code is not a 1 MiB log line.
func TestSenderCodeIsTheCodeTheRowKeeps(t *testing.T) {
	huge := strings.Repeat("x", 1<<20)
	cases := []struct{ code, want string }{
		{"http.503", "http.503"},
		{"", ""},
		{turnframe.CodeSendTimeout, turnframe.CodeInvalidCode},
		{"turnframe.", turnframe.CodeInvalidCode},
		{"http.\xff\xfe", turnframe.CodeInvalidCode},
		{huge, turnframe.CodeInvalidCode},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%.20q", tc.code), func(t *testing.T) {
			is := is.New(t)
			is.Equal(turnframe.SenderCode(tc.code), tc.want) // the kept code
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				rows := dispEnqueue(t, store, "acme", "k1", turnframe.OutboxMessage{Destination: "payments"})
				var log dispLog
				sender := &dispAnswer{out: turnframe.Dispatched{Kind: turnframe.DispatchRetryable, Code: tc.code}}
				d := turnframe.NewDispatcher(store, sender, turnframe.DefaultDispatchConfig("w1"), turnframe.WithLogger(dispLogger(&log)))
				_, err := d.RunOnce(context.Background(), dispNow)
				is.NoErr(err)
				is.Equal(dispGet(t, store, rows[0].ID).LastCode, tc.want) // the row keeps what SenderCode says
				is.True(len(log.String()) < 64<<10)                       // the replaced code is logged cut short
			})
		})
	}
}

// A slow answer never shortens the wait its Retry-After asked for, also when
// the backoff is the longer wait: counted from the claim, a Retry-After
// equal to or below the backoff made a row answered after 30 s due before
// its answer came, and it was sent again at once.
func TestASlowAnswersRetryAfterIsNeverShortenedByTheBackoff(t *testing.T) {
	for _, tc := range []struct {
		name       string
		initial    time.Duration
		retryAfter time.Duration
	}{
		{"equal to the backoff", 0, time.Second},                // default InitialBackoff 1 s
		{"below the backoff", 4 * time.Second, 3 * time.Second}, // backoff 4 s decides, answer after 30 s
	} {
		t.Run(tc.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				const took = 30 * time.Second
				row := dispEnqueue(t, store, rtAccount, "k1", turnframe.OutboxMessage{Destination: "payments"})[0]
				clock := newStepClock(dispNow)
				sender := turnframe.SenderFunc(func(context.Context, turnframe.OutboxEntry) turnframe.Dispatched {
					clock.set(dispNow.Add(took)) // the remote answers after 30 s
					return turnframe.Dispatched{Kind: turnframe.DispatchRetryable, Code: "http.503", RetryAfter: tc.retryAfter}
				})
				d := turnframe.NewDispatcher(store, sender, turnframe.DispatchConfig{WorkerID: "w1", SendTimeout: time.Hour, InitialBackoff: tc.initial}, turnframe.WithClock(clock.read))
				_, err := d.RunOnce(context.Background(), dispNow)
				is.NoErr(err)
				got := dispGet(t, store, row.ID)
				is.Equal(got.Status, turnframe.OutboxPending)
				answered := dispNow.Add(took)
				t.Logf("answered at +%v, Retry-After %v, due at +%v", took, tc.retryAfter, got.DueAt.Sub(dispNow))
				is.True(!got.DueAt.Before(answered.Add(tc.retryAfter))) // never due before the wait the remote asked for, from its answer
			})
		})
	}
}
