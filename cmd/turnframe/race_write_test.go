package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

// 'release --force ID' reads a row never claimed (pending, 0 attempts);
// before its write, a live dispatcher claims the row and starts sending.
// The release is refused on what it read: handed on, 0 attempts would be
// no fence, the live claim would go back to pending and the row would be
// sent a second time while its first send runs.
func TestForceReleaseOfARowReadUnclaimedNeverFreesAClaimTakenSince(t *testing.T) {
	is := is.New(t)
	f := mustFixture(t)
	store := openFixture(t, f)
	ctx := context.Background()
	now := f.t0.Add(25 * time.Hour) // the later row is due
	before, err := store.GetOutbox(ctx, f.later)
	is.NoErr(err)
	is.Equal(before.Status, turnframe.OutboxPending) // never claimed
	racing := &raceAfterRead{opStore: sqliteOps{store}, during: func() {
		_, err := store.ClaimDue(ctx, now, 16, "live-dispatcher", 10*time.Minute)
		is.NoErr(err) // a live dispatcher claims the row
	}}
	e := &env{stdout: io.Discard, stderr: io.Discard, now: func() time.Time { return now }}
	err = forceRelease(ctx, e, racing, f.later, requeueFence{}, now)
	is.True(racing.done.Load())                    // the claim landed between the read and the write
	is.True(errors.Is(err, turnframe.ErrConflict)) // the row read was not dispatching: refused
	after, err := store.GetOutbox(ctx, f.later)
	is.NoErr(err)
	is.Equal(after.Status, turnframe.OutboxDispatching) // the live claim keeps its row
	is.Equal(after.ClaimedBy, "live-dispatcher")
}

// 'turnframe requeue ID' without --attempt reads a row never sent
// (pending, 0 attempts); a dispatcher then sends the row and the remote
// refuses it for good — here when the command first reads its clock, which
// it once did between its read of the row and its write. The requeue is
// refused (exit 2) on what it read: handed on, 0 attempts would be no
// fence, and the failure nobody saw would be sent again.
func TestRequeueOfARowReadUnsentNeverRequeuesAFailureSince(t *testing.T) {
	is := is.New(t)
	f := mustFixture(t)
	store := openFixture(t, f)
	ctx := context.Background()
	now := f.t0.Add(25 * time.Hour) // the later row is due
	var once atomic.Bool
	clock := func() time.Time {
		if once.CompareAndSwap(false, true) {
			claims, err := store.ClaimDue(ctx, now, 16, "dispatcher", 10*time.Minute)
			is.NoErr(err)
			for _, c := range claims {
				if c.ID == f.later {
					is.NoErr(turnframe.FailClaim(ctx, store, c, "http.400", now)) // refused for good
				}
			}
		}
		return now
	}
	e := &env{stdout: io.Discard, stderr: io.Discard, now: clock}
	code := runEnv(ctx, e, []string{"requeue", "--db", f.path, f.later.String()})
	after, err := store.GetOutbox(ctx, f.later)
	is.NoErr(err)
	is.Equal(code, exitUsage) // the row read was not failed: refused
	if once.Load() {          // the clock was read after the read of the row
		is.Equal(after.Status, turnframe.OutboxFailed) // the failure since is not sent again
	} else {
		is.Equal(after.Status, turnframe.OutboxPending) // refused before anything moved
		is.Equal(after.Attempts, 0)
	}
}

// keyReadRace is an opStore whose first ByKey, once it has read, runs
// during.
type keyReadRace struct {
	opStore
	once   atomic.Bool
	during func()
}

func (s *keyReadRace) ByKey(ctx context.Context, a turnframe.AccountID, k turnframe.IdempotencyKey) (turnframe.JournalEntry, error) {
	e, err := s.opStore.ByKey(ctx, a, k)
	if s.once.CompareAndSwap(false, true) {
		s.during()
	}
	return e, err
}

// The page approves an entry read on turn T1, abandoned; before the
// approval, a new turn T2 plans the same command and adopts the entry.
// Runtime.Approve follows it to T2, and the page names T2, the turn that
// will run it, not the abandoned one.
func TestTheUIsApprovalNamesTheTurnThatAdoptedTheEntry(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "app.db")
	store, err := sqlitestore.Open(ctx, path)
	is.NoErr(err)
	t.Cleanup(func() { store.Close() })
	rt := turnframe.New(store)
	cmd := turnframe.Command{Key: "k-pay", Case: "card/1", Name: "pay", Payload: []byte("p"), NeedsApproval: true}
	plan := func() turnframe.TurnID {
		turn, err := rt.Receive(ctx, fixtureAccount, rt.NewConversationID(), "pay it")
		is.NoErr(err)
		_, err = rt.Plan(ctx, fixtureAccount, turn, turnframe.Plan{Commands: []turnframe.Command{cmd}})
		is.NoErr(err)
		return turn
	}
	t1 := plan()
	is.NoErr(rt.Abandon(ctx, fixtureAccount, t1, "user.left"))
	var t2 turnframe.TurnID
	racing := &keyReadRace{opStore: sqliteOps{store}, during: func() { t2 = plan() }}
	e := &env{stdout: io.Discard, stderr: io.Discard, now: time.Now, page: 3}
	s, err := newUIServer(racing, &dbFlags{path: path, busy: 50 * time.Millisecond}, e,
		uiOptions{loopback: true, actor: turnframe.ActorOperator})
	is.NoErr(err)
	form := url.Values{"account": {string(fixtureAccount)}, "key": {"k-pay"}, "note": {"ok"}}
	req := httptest.NewRequest(http.MethodPost, "/approve", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	msg, err := s.approval(true)(req)
	is.NoErr(err)
	got, err := store.ByKey(ctx, fixtureAccount, "k-pay")
	is.NoErr(err)
	is.Equal(got.Turn, t2)                       // approved on the turn that adopted it
	is.True(strings.Contains(msg, t2.String()))  // the page names it
	is.True(!strings.Contains(msg, t1.String())) // not the abandoned one
}

// 'turnframe settle ID completed' reads the row outcome_unknown; before
// its settlement, recovery's policy escalates the row. The settlement still
// lands (an operator may settle what needs intervention), and the line
// printed names the move the history records, not the status first read.
func TestSettlePrintsTheMoveItMadeNotTheStatusItRead(t *testing.T) {
	is := is.New(t)
	f := mustFixture(t)
	store := openFixture(t, f)
	ctx := context.Background()
	now := time.Now()
	racing := &raceAfterRead{opStore: sqliteOps{store}, during: func() {
		is.NoErr(store.Resolve(ctx, turnframe.Resolution{ID: f.unknown, Verdict: turnframe.VerdictEscalate,
			Actor: turnframe.ActorPolicy, Code: "policy.no_lookup", Now: now})) // escalated meanwhile
	}}
	var out strings.Builder
	e := &env{stdout: &out, stderr: io.Discard, now: func() time.Time { return now }}
	rec := turnframe.NewRecovery(store, turnframe.WithClock(e.now))
	req := settleRequest{id: f.unknown, decision: turnframe.Decision{Verdict: turnframe.VerdictCompleted, Actor: turnframe.ActorOperator}}
	is.NoErr(settleRow(ctx, e, racing, rec, req, &dbFlags{path: f.path}))
	is.True(racing.done.Load())                                               // escalated between the read and the settlement
	is.True(strings.Contains(out.String(), "needs_intervention → completed")) // the move made
}

// settleReadBack is an opStore whose second GetOutbox (settle's read of the
// row after its settlement) first runs during.
type settleReadBack struct {
	opStore
	n      atomic.Int32
	during func()
}

func (s *settleReadBack) GetOutbox(ctx context.Context, id turnframe.OutboxID) (turnframe.OutboxRecord, error) {
	if s.n.Add(1) == 2 {
		s.during()
	}
	return s.opStore.GetOutbox(ctx, id)
}

// 'turnframe settle ID resend': the operator's resend lands (outcome_unknown
// → pending); a live dispatcher claims the row before settle reads it back.
// The line printed names the operator's move, not the dispatcher's claim.
func TestSettlePrintsTheOperatorsMoveNotALaterClaim(t *testing.T) {
	is := is.New(t)
	f := mustFixture(t)
	store := openFixture(t, f)
	ctx := context.Background()
	now := f.t0.Add(25 * time.Hour)
	racing := &settleReadBack{opStore: sqliteOps{store}, during: func() {
		claims, err := store.ClaimDue(ctx, now, 16, "live-dispatcher", 10*time.Minute)
		is.NoErr(err)
		is.True(len(claims) > 0)
	}}
	var out strings.Builder
	e := &env{stdout: &out, stderr: io.Discard, now: func() time.Time { return now }}
	rec := turnframe.NewRecovery(store, turnframe.WithClock(e.now))
	req := settleRequest{id: f.unknown, decision: turnframe.Decision{Verdict: turnframe.VerdictResend, Actor: turnframe.ActorOperator}}
	is.NoErr(settleRow(ctx, e, racing, rec, req, &dbFlags{path: f.path}))
	is.True(strings.Contains(out.String(), "outcome_unknown → pending")) // the move the operator made
}
