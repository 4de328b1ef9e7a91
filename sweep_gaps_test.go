package turnframe_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// lostExtensions passes extensions to the store and closes lost when the
// keeper starts the extension after one that came back ErrClaimLost for a
// row: the keeper extends one call at a time, so by then the sweep has
// taken in the refusal.
type lostExtensions struct {
	turnframe.Store
	mu   sync.Mutex
	seen bool
	once sync.Once
	lost chan struct{}
}

func (s *lostExtensions) ExtendClaims(ctx context.Context, cs []turnframe.Claim, now time.Time, lease time.Duration) ([]error, error) {
	s.mu.Lock()
	if s.seen {
		s.once.Do(func() { close(s.lost) })
	}
	s.mu.Unlock()
	results, err := s.Store.ExtendClaims(ctx, cs, now, lease)
	for _, r := range results {
		if errors.Is(r, turnframe.ErrClaimLost) {
			s.mu.Lock()
			s.seen = true
			s.mu.Unlock()
		}
	}
	return results, err
}

// DESIGN/RunOnce: a dispatcher "sends exactly what its claim returned";
// the sweep's keeper marks a row whose extension the store refused as lost:
// "not extended: its send, if not started, never starts". Here a waiting
// row's claim is released by an operator (ReleaseClaim: "If that worker is
// in fact still sending, the row may be sent twice") while its lease still
// runs for the whole SendTimeout: the keeper's next extension finds it
// lost. That row must not be sent on the lost claim — only the lease-end
// test would not stop it, as the lease still covers a send. And its
// refused put-back records no late answer: none was sent, none answered.
func TestARowWhoseClaimWasFoundLostWhileItWaitedIsNotSent(t *testing.T) {
	eachStore(t, func(t *testing.T, inner turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		rows := dispEnqueue(t, inner, rtAccount, "k1", dispMessages(2, "bakery", "")...)
		clock := newStepClock(dispNow) // never moves: every lease covers a send
		sender := &gatedSends{first: make(chan turnframe.OutboxID, 1), proceed: make(chan struct{})}
		cfg := turnframe.DispatchConfig{WorkerID: "w1", Concurrency: 1, SendTimeout: time.Hour, LeaseMargin: 10 * time.Millisecond}
		store := &lostExtensions{Store: inner, lost: make(chan struct{})}
		d := turnframe.NewDispatcher(store, sender, cfg, turnframe.WithClock(clock.read))
		done := runOnceAsync(t, d, ctx, dispNow)
		holder := await(t, sender.first, "the first send runs")
		waiter := otherRow(rows, holder)
		is.NoErr(inner.ReleaseClaim(ctx, waiter, 0, dispNow)) // an operator takes the waiting row's claim
		await(t, (<-chan struct{})(store.lost), "the keeper finds the waiting row's claim lost")
		close(sender.proceed)
		report := await(t, done, "RunOnce returns")
		sender.mu.Lock()
		defer sender.mu.Unlock()
		is.Equal(sender.sent, []turnframe.OutboxID{holder}) // the row whose claim was lost was never sent
		is.Equal(report.Unsettled, []turnframe.OutboxID{waiter})
		// Its put-back (CodeNotSent) is refused as ErrClaimLost; a row never
		// sent gave no answer, so nothing is recorded as a late answer.
		for _, h := range histOf(t, inner, turnframe.OutboxSubject(rtAccount, waiter)) {
			is.True(!h.Evidence) // no evidence of an answer from a send never made
		}
	})
}

// closedWhileBusy answers the first Settle as a store does when it was
// closed while the settlement waited for its lock (sqlitestore's fail: an
// error met while closing wraps ErrClosed too), then passes calls on.
type closedWhileBusy struct {
	turnframe.Store
	mu    sync.Mutex
	calls int
}

func (s *closedWhileBusy) Settle(ctx context.Context, st []turnframe.OutboxSettlement) ([]error, error) {
	s.mu.Lock()
	s.calls++
	n := s.calls
	s.mu.Unlock()
	if n == 1 {
		return nil, fmt.Errorf("settle: %w: %w", turnframe.ErrClosed, turnframe.ErrBusy)
	}
	return s.Store.Settle(ctx, st)
}

// RunOnce: "A settlement the store refuses as busy (ErrBusy) is tried
// again, with backoff, until it lands or the store is closed"; the sweep's
// write "gives up only when the store is closed, or ...". An answer that is
// busy and closed at once (the store closed while the write waited) is
// closed: the settler gives up at once instead of trying a closed store
// again until the leases end.
func TestASettlementRefusedAsClosedWhileBusyIsGivenUp(t *testing.T) {
	eachStore(t, func(t *testing.T, inner turnframe.Store) {
		is := is.New(t)
		rows := dispEnqueue(t, inner, rtAccount, "k1", turnframe.OutboxMessage{Destination: "payments"})
		store := &closedWhileBusy{Store: inner}
		cfg := turnframe.DefaultDispatchConfig("w1")
		sender := turnframe.SenderFunc(func(context.Context, turnframe.OutboxEntry) turnframe.Dispatched {
			return turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200"}
		})
		d := turnframe.NewDispatcher(store, sender, cfg, turnframe.WithClock(newStepClock(dispNow).read))
		report, err := d.RunOnce(context.Background(), dispNow)
		is.NoErr(err)
		is.Equal(report.Unsettled, []turnframe.OutboxID{rows[0].ID}) // given up: the store is closed
		store.mu.Lock()
		defer store.mu.Unlock()
		is.Equal(store.calls, 1) // never tried again
	})
}

// overlapWatch holds each Settle and each ExtendClaims of row for a while
// (up to hold, less once the other kind of call meets it) and records
// whether the two ever ran at once on the row.
type overlapWatch struct {
	turnframe.Store
	row       turnframe.OutboxID
	hold      time.Duration
	extended  chan struct{} // closed when the first extension of row starts
	once      sync.Once
	mu        sync.Mutex
	settling  int
	extending int
	met       chan struct{} // closed when the two met
	metOnce   sync.Once
}

func (w *overlapWatch) holds(ids []turnframe.OutboxID) bool {
	for _, id := range ids {
		if id == w.row {
			return true
		}
	}
	return false
}

// enter marks one call of a kind as running on the row, notes a meeting,
// and waits for one (at most hold) so the other kind has time to come.
func (w *overlapWatch) enter(mine, theirs *int) func() {
	w.mu.Lock()
	*mine++
	if *theirs > 0 {
		w.metOnce.Do(func() { close(w.met) })
	}
	w.mu.Unlock()
	select {
	case <-w.met:
	case <-time.After(w.hold):
	}
	return func() { w.mu.Lock(); *mine--; w.mu.Unlock() }
}

func (w *overlapWatch) Settle(ctx context.Context, st []turnframe.OutboxSettlement) ([]error, error) {
	ids := make([]turnframe.OutboxID, len(st))
	for i, s := range st {
		ids[i] = s.Claim.ID
	}
	if w.holds(ids) {
		defer w.enter(&w.settling, &w.extending)()
	}
	return w.Store.Settle(ctx, st)
}

func (w *overlapWatch) ExtendClaims(ctx context.Context, cs []turnframe.Claim, now time.Time, lease time.Duration) ([]error, error) {
	ids := make([]turnframe.OutboxID, len(cs))
	for i, c := range cs {
		ids[i] = c.ID
	}
	if w.holds(ids) {
		w.once.Do(func() { close(w.extended) })
		defer w.enter(&w.extending, &w.settling)()
	}
	return w.Store.ExtendClaims(ctx, cs, now, lease)
}

// The sweep's rule (outbox_sweep.go, sweep.writing): "a lease extension
// never meets a row this sweep settled or is settling: a lost claim it
// reports is someone else's doing". An extension under way when a send
// ends must end before the settlement starts, and the keeper leaves a row
// alone while its settlement is written; otherwise the extension meets the
// settled row, is refused ErrClaimLost, and the sweep logs that the row
// "may be sent twice" when nothing happened. The store here holds each
// call on the row a moment, so that two that may overlap do.
func TestALeaseExtensionNeverMeetsTheRowsSettlement(t *testing.T) {
	eachStore(t, func(t *testing.T, inner turnframe.Store) {
		is := is.New(t)
		rows := dispEnqueue(t, inner, rtAccount, "k1", turnframe.OutboxMessage{Destination: "payments"})
		w := &overlapWatch{Store: inner, row: rows[0].ID, hold: 300 * time.Millisecond,
			extended: make(chan struct{}), met: make(chan struct{})}
		cfg := turnframe.DispatchConfig{WorkerID: "w1", SendTimeout: time.Hour, LeaseMargin: 10 * time.Millisecond}
		sender := turnframe.SenderFunc(func(context.Context, turnframe.OutboxEntry) turnframe.Dispatched {
			<-w.extended // the send ends while the keeper extends its lease
			return turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200"}
		})
		d := turnframe.NewDispatcher(w, sender, cfg, turnframe.WithClock(newStepClock(dispNow).read))
		report, err := d.RunOnce(context.Background(), dispNow)
		is.NoErr(err)
		is.Equal(report.Completed, []turnframe.OutboxID{rows[0].ID})
		select {
		case <-w.met:
			t.Fatal("a lease extension of the row ran while its settlement was written")
		default:
		}
	})
}

// grantedAfter passes extensions on and closes granted when the keeper
// starts the extension after one made at or after from that was granted
// for every claim it carried: the keeper extends one call at a time, so by
// then the sweep has taken in the new lease end.
type grantedAfter struct {
	turnframe.Store
	from    time.Time
	mu      sync.Mutex
	seen    bool
	once    sync.Once
	granted chan struct{}
}

func (s *grantedAfter) ExtendClaims(ctx context.Context, cs []turnframe.Claim, now time.Time, lease time.Duration) ([]error, error) {
	s.mu.Lock()
	if s.seen {
		s.once.Do(func() { close(s.granted) })
	}
	s.mu.Unlock()
	results, err := s.Store.ExtendClaims(ctx, cs, now, lease)
	if err == nil && !now.Before(s.from) && len(results) == len(cs) {
		for _, r := range results {
			if r != nil {
				return results, err
			}
		}
		s.mu.Lock()
		s.seen = true
		s.mu.Unlock()
	}
	return results, err
}

// RunOnce: "it extends the lease of every row it has not settled yet, in
// good time, so no release takes a row from a live sweep however long its
// sends take". A row waiting for a sender while the first send runs past
// the claim's first lease keeps a lease the keeper extended: once its turn
// comes it is sent under that lease, not put back unsent as if its claim
// had ended — the sweep must judge a row's lease by the end the store last
// granted it.
func TestAWaitingRowIsSentUnderTheLeaseTheKeeperExtended(t *testing.T) {
	eachStore(t, func(t *testing.T, inner turnframe.Store) {
		is := is.New(t)
		rows := dispEnqueue(t, inner, rtAccount, "k1", dispMessages(2, "bakery", "")...)
		clock := newStepClock(dispNow)
		cfg := turnframe.DispatchConfig{WorkerID: "w1", Concurrency: 1, SendTimeout: time.Hour, LeaseMargin: 10 * time.Millisecond}
		store := &grantedAfter{Store: inner, from: dispNow.Add(30 * time.Minute), granted: make(chan struct{})}
		var mu sync.Mutex
		var sent []turnframe.OutboxID
		sender := turnframe.SenderFunc(func(_ context.Context, e turnframe.OutboxEntry) turnframe.Dispatched {
			mu.Lock()
			sent = append(sent, e.ID)
			first := len(sent) == 1
			mu.Unlock()
			if first {
				clock.set(dispNow.Add(30 * time.Minute))
				await(t, (<-chan struct{})(store.granted), "the keeper extends the leases half an hour on")
				// Past the claim's first lease (an hour and 10ms), well within the extended one.
				clock.set(dispNow.Add(time.Hour + 20*time.Minute))
			}
			return turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200"}
		})
		d := turnframe.NewDispatcher(store, sender, cfg, turnframe.WithClock(clock.read))
		report, err := d.RunOnce(context.Background(), dispNow)
		is.NoErr(err)
		is.Equal(len(report.Completed), 2) // both sent and completed
		is.Equal(len(report.Retried), 0)   // none put back unsent
		mu.Lock()
		defer mu.Unlock()
		is.Equal(len(sent), len(rows))
	})
}

// meddledCutStore holds the sweep's first (lone) settlement until release;
// a batch of more than one finds its rows moved by others first (meddle),
// then waits on a lock until its try is cut at the leases' end.
type meddledCutStore struct {
	turnframe.Store
	release chan struct{}
	called  chan struct{}
	first   sync.Once
	meddle  func(ids []turnframe.OutboxID) error
	mu      sync.Mutex
	batch   []turnframe.OutboxID
}

func (s *meddledCutStore) Settle(ctx context.Context, st []turnframe.OutboxSettlement) ([]error, error) {
	s.first.Do(func() { close(s.called); <-s.release })
	if len(st) > 1 {
		var ids []turnframe.OutboxID
		for _, x := range st {
			ids = append(ids, x.Claim.ID)
		}
		s.mu.Lock()
		s.batch = ids
		s.mu.Unlock()
		if err := s.meddle(ids); err != nil {
			return nil, err
		}
		<-ctx.Done()
		return nil, fmt.Errorf("lock wait: %w", ctx.Err())
	}
	return s.Store.Settle(ctx, st)
}

// writeEach's rule (outbox_sweep.go): "A single refused as ErrClaimLost
// whose row stands as its settlement makes it (landed) was written by the
// batch's cut try" — and only then. A row whose cut batch did not land,
// and which others settled meanwhile (its lease ended, recovery expired
// it, and an operator resolved it, or it was sent again under the same
// worker's new claim and completed), was not settled by this sweep: it is
// reported Unsettled, and the send's answer is recorded as a late answer
// (DESIGN §8), not passed off as this sweep's completion.
func TestACutBatchsRowSettledByOthersIsNotTakenAsLanded(t *testing.T) {
	cases := []struct {
		name   string
		settle func(t *testing.T, s turnframe.Store, now time.Time, ids []turnframe.OutboxID) error
	}{
		{"ResolvedByAnOperator", func(t *testing.T, s turnframe.Store, now time.Time, ids []turnframe.OutboxID) error {
			for _, id := range ids {
				if err := s.Resolve(context.Background(), turnframe.Resolution{ID: id, Verdict: turnframe.VerdictCompleted,
					Code: "ops.checked", Actor: turnframe.ActorOperator, Now: now}); err != nil {
					return err
				}
			}
			return nil
		}},
		{"SentAgainUnderTheSameWorker", func(t *testing.T, s turnframe.Store, now time.Time, ids []turnframe.OutboxID) error {
			for _, id := range ids {
				if err := s.Resolve(context.Background(), turnframe.Resolution{ID: id, Verdict: turnframe.VerdictResend,
					Actor: turnframe.ActorOperator, Now: now}); err != nil {
					return err
				}
			}
			claims, err := s.ClaimDue(context.Background(), now, 10, "w1", time.Hour)
			if err != nil {
				return err
			}
			for _, c := range claims {
				results, err := s.Settle(context.Background(), []turnframe.OutboxSettlement{{Claim: c, To: turnframe.OutboxCompleted, Code: "http.200", Now: now}})
				if err != nil {
					return err
				}
				if results[0] != nil {
					return results[0]
				}
			}
			return nil
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, inner turnframe.Store) {
				is := is.New(t)
				for i, acct := range []turnframe.AccountID{"a", "b", "c", "d"} {
					dispEnqueue(t, inner, acct, turnframe.IdempotencyKey(fmt.Sprintf("k%d", i)), turnframe.OutboxMessage{Destination: "payments"})
				}
				clock := newStepClock(dispNow)
				store := &meddledCutStore{Store: inner, release: make(chan struct{}), called: make(chan struct{})}
				store.meddle = func(ids []turnframe.OutboxID) error {
					now := clock.read()
					if _, err := inner.ExpireClaims(context.Background(), now); err != nil { // recovery: their leases ended
						return err
					}
					return tc.settle(t, inner, now, ids)
				}
				cfg := turnframe.DefaultDispatchConfig("w1")
				cfg.Concurrency = 1
				n := 0
				sender := turnframe.SenderFunc(func(_ context.Context, e turnframe.OutboxEntry) turnframe.Dispatched {
					n++
					if n == 2 {
						<-store.called
					}
					if n == 4 { // the settlements of the second and third rows are queued: they go as one batch
						clock.set(dispNow.Add(cfg.Lease() + time.Second)) // the leases ended; the try is bounded to a second
						close(store.release)
					}
					return turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200"}
				})
				d := turnframe.NewDispatcher(store, sender, cfg, turnframe.WithClock(clock.read))
				report, err := d.RunOnce(context.Background(), dispNow)
				is.NoErr(err)
				store.mu.Lock()
				batch := store.batch
				store.mu.Unlock()
				is.True(len(batch) >= 2)
				for _, id := range batch {
					is.True(slices.Contains(report.Unsettled, id)) // not this sweep's settlement
					is.True(!slices.Contains(report.Completed, id))
					rec := dispGet(t, inner, id)
					late := 0
					for _, h := range histOf(t, inner, turnframe.OutboxSubject(rec.Account, id)) {
						if h.Evidence {
							late++
						}
					}
					is.True(late > 0) // the send's answer is kept as evidence
				}
			})
		})
	}
}

// settledThenExtended records, once the first settlement landed, the next
// extension's claims and results, and closes next.
type settledThenExtended struct {
	turnframe.Store
	mu      sync.Mutex
	settled map[turnframe.OutboxID]bool
	once    sync.Once
	next    chan struct{}
	claims  []turnframe.OutboxID
	lost    int
}

func (s *settledThenExtended) Settle(ctx context.Context, st []turnframe.OutboxSettlement) ([]error, error) {
	results, err := s.Store.Settle(ctx, st)
	if err == nil {
		s.mu.Lock()
		for i, x := range st {
			if results[i] == nil {
				s.settled[x.Claim.ID] = true
			}
		}
		s.mu.Unlock()
	}
	return results, err
}

func (s *settledThenExtended) ExtendClaims(ctx context.Context, cs []turnframe.Claim, now time.Time, lease time.Duration) ([]error, error) {
	s.mu.Lock()
	after := len(s.settled) > 0
	s.mu.Unlock()
	results, err := s.Store.ExtendClaims(ctx, cs, now, lease)
	if after && err == nil {
		s.once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			for i, c := range cs {
				s.claims = append(s.claims, c.ID)
				if results[i] != nil {
					s.lost++
				}
			}
			close(s.next)
		})
	}
	return results, err
}

// RunOnce: "it extends the lease of every row it has not settled yet"; the
// keeper's rule: "a lost claim it reports is someone else's doing". A row
// this sweep settled is out of the keeper's care at once: extending it
// would be refused ErrClaimLost and logged as a claim lost "while its send
// may run; it may be sent twice", of a row settled once and for all.
func TestASettledRowsLeaseIsNotExtended(t *testing.T) {
	eachStore(t, func(t *testing.T, inner turnframe.Store) {
		is := is.New(t)
		dispEnqueue(t, inner, rtAccount, "k1", dispMessages(2, "bakery", "")...)
		store := &settledThenExtended{Store: inner, settled: map[turnframe.OutboxID]bool{}, next: make(chan struct{})}
		cfg := turnframe.DispatchConfig{WorkerID: "w1", Concurrency: 1, SendTimeout: time.Hour, LeaseMargin: 10 * time.Millisecond}
		var first turnframe.OutboxID
		sender := turnframe.SenderFunc(func(_ context.Context, e turnframe.OutboxEntry) turnframe.Dispatched {
			if first.IsZero() {
				first = e.ID
			} else {
				await(t, (<-chan struct{})(store.next), "the keeper extends after the first row settled")
			}
			return turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200"}
		})
		d := turnframe.NewDispatcher(store, sender, cfg, turnframe.WithClock(newStepClock(dispNow).read))
		report, err := d.RunOnce(context.Background(), dispNow)
		is.NoErr(err)
		is.Equal(len(report.Completed), 2)
		store.mu.Lock()
		defer store.mu.Unlock()
		for _, id := range store.claims {
			is.True(id != first) // the settled row's lease is left alone
		}
		is.Equal(store.lost, 0) // and no claim is reported lost
	})
}

// renewOnly refuses every lease extension as busy but a lone claim's at
// or after from (the renewal of a row that waited), and answers the first
// settlement of row (set once known) busy.
type renewOnly struct {
	turnframe.Store
	from  time.Time
	mu    sync.Mutex
	row   turnframe.OutboxID
	tries int
}

func (s *renewOnly) ExtendClaims(ctx context.Context, cs []turnframe.Claim, now time.Time, lease time.Duration) ([]error, error) {
	if len(cs) > 1 || now.Before(s.from) {
		return nil, turnframe.ErrBusy
	}
	return s.Store.ExtendClaims(ctx, cs, now, lease)
}

func (s *renewOnly) Settle(ctx context.Context, st []turnframe.OutboxSettlement) ([]error, error) {
	s.mu.Lock()
	busy := false
	for _, x := range st {
		if x.Claim.ID == s.row {
			s.tries++
			busy = s.tries == 1
		}
	}
	s.mu.Unlock()
	if busy {
		return nil, fmt.Errorf("settle: %w", turnframe.ErrBusy)
	}
	return s.Store.Settle(ctx, st)
}

// RunOnce: a settlement refused as busy "is tried again, with backoff,
// until it lands or the store is closed — even after ctx ended, until the
// rows' leases end". A row that waited while the keeper could not extend
// its lease is renewed alone before its send (covered); its settlement is
// then bounded by that renewed lease, not by the lease it had before: here
// ctx ends during its send, the clock passes the old lease end, and the
// store answers its settlement busy once — it is tried again and lands.
func TestASettlementAfterARenewalIsTriedUntilTheRenewedLeaseEnds(t *testing.T) {
	eachStore(t, func(t *testing.T, inner turnframe.Store) {
		is := is.New(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		rows := dispEnqueue(t, inner, rtAccount, "k1", dispMessages(2, "bakery", "")...)
		clock := newStepClock(dispNow)
		sender := newTwoSends()
		cfg := turnframe.DispatchConfig{WorkerID: "w1", Concurrency: 2, SendTimeout: time.Hour, LeaseMargin: 10 * time.Millisecond,
			DestinationLimits: map[string]int{"bakery": 1}}
		store := &renewOnly{Store: inner, from: dispNow.Add(time.Hour)}
		d := turnframe.NewDispatcher(store, sender, cfg, turnframe.WithClock(clock.read))
		done := runOnceAsync(t, d, ctx, dispNow)
		holder := await(t, sender.first, "the first send holds the place")
		waiter := otherRow(rows, holder)
		store.mu.Lock()
		store.row = waiter
		store.mu.Unlock()
		clock.set(dispNow.Add(time.Hour)) // the claim's lease (an hour and 10 ms) has 10 ms left: the waiter is renewed
		close(sender.proceed1)
		is.Equal(await(t, sender.second, "the waiter's send starts"), waiter)
		cancel()                                 // the caller's context ends: the keeper stops
		clock.set(dispNow.Add(90 * time.Minute)) // past the first lease, well within the renewed one
		close(sender.proceed2)
		report := await(t, done, "RunOnce returns")
		is.True(!slices.Contains(report.Unsettled, waiter)) // its settlement was not given up while its lease ran
		store.mu.Lock()
		defer store.mu.Unlock()
		is.Equal(store.tries, 2) // tried again after the busy answer
	})
}

// afterCancel answers the first few settlements busy and counts the
// lease extensions that reach it once ended is closed.
type afterCancel struct {
	turnframe.Store
	ended chan struct{}
	mu    sync.Mutex
	busy  int
	late  int
}

func (s *afterCancel) Settle(ctx context.Context, st []turnframe.OutboxSettlement) ([]error, error) {
	s.mu.Lock()
	busy := s.busy > 0
	s.busy--
	s.mu.Unlock()
	if busy {
		return nil, fmt.Errorf("settle: %w", turnframe.ErrBusy)
	}
	return s.Store.Settle(ctx, st)
}

func (s *afterCancel) ExtendClaims(ctx context.Context, cs []turnframe.Claim, now time.Time, lease time.Duration) ([]error, error) {
	select {
	case <-s.ended:
		s.mu.Lock()
		s.late++
		s.mu.Unlock()
	default:
	}
	return s.Store.ExtendClaims(ctx, cs, now, lease)
}

// The keeper (outbox_sweep.go keepLeases): "Once the caller's context
// ended it stops: ... the settler's tries are bounded by the leases as they
// stand." RunOnce: a busy settlement is tried again after ctx ended "until
// the rows' leases end" — leases a keeper still extending would never let
// end. Here the store answers the settlement busy for about 600 ms after
// ctx ended, with the keeper's tick at 5 ms: only an extension already
// under way when ctx ended may reach the store after it.
func TestTheKeeperStopsExtendingOnceTheContextEnded(t *testing.T) {
	eachStore(t, func(t *testing.T, inner turnframe.Store) {
		is := is.New(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		dispEnqueue(t, inner, rtAccount, "k1", turnframe.OutboxMessage{Destination: "payments"})
		store := &afterCancel{Store: inner, ended: make(chan struct{}), busy: 6}
		cfg := turnframe.DispatchConfig{WorkerID: "w1", SendTimeout: time.Hour, LeaseMargin: 10 * time.Millisecond}
		sender := turnframe.SenderFunc(func(context.Context, turnframe.OutboxEntry) turnframe.Dispatched {
			cancel()
			close(store.ended)
			return turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200"}
		})
		d := turnframe.NewDispatcher(store, sender, cfg, turnframe.WithClock(newStepClock(dispNow).read))
		_, err := d.RunOnce(ctx, dispNow)
		is.NoErr(err)
		store.mu.Lock()
		defer store.mu.Unlock()
		is.True(store.busy < 0) // every busy answer was given: the settler tried on
		t.Logf("extensions after ctx ended: %d", store.late)
		is.True(store.late <= 1) // the keeper stopped
	})
}
