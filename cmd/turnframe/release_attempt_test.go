package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// The operator looks at the row (turnframe outbox / show): claimed
// by a worker that died, attempt 1, lease long ended. Knowing that worker
// is gone, they decide to force it back. Before they type the command, the
// application's Recover expires the claim, its policy resends the row and
// a live dispatcher claims it (attempt 2, its send under way). 'release
// --force ID' fences only on its own read, taken a moment before its
// write, so it frees the live claim: the row is sent a second time while
// its first send runs. Requeue and settle take --attempt for exactly this
// stale look (RELIABILITY §13 row 14, §12 row 8); release --force cannot
// say which claim the operator knows is dead, though OutboxStore.ReleaseClaim
// documents its fence as "the row's Attempts when the operator looked".
func TestForceReleaseOfTheClaimLookedAtNeverFreesALaterLiveClaim(t *testing.T) {
	is := is.New(t)
	f := mustFixture(t)
	store := openFixture(t, f)
	ctx := context.Background()
	now := f.t0.Add(30 * time.Minute) // the dead worker's lease ended at t0 + 10m

	looked, err := store.GetOutbox(ctx, f.claimed) // what the operator saw
	is.NoErr(err)
	is.Equal(looked.Status, turnframe.OutboxDispatching)
	is.Equal(looked.Attempts, 1)

	// Meanwhile: Recover expires the dead claim, the policy resends it, a
	// live dispatcher claims it again.
	expired, err := store.ExpireClaims(ctx, now)
	is.NoErr(err)
	is.True(len(expired) > 0)
	is.NoErr(store.Resolve(ctx, turnframe.Resolution{ID: f.claimed, Verdict: turnframe.VerdictResend,
		Actor: turnframe.ActorPolicy, Code: turnframe.CodeUndeclaredResend, Attempts: 1, Now: now}))
	claims, err := store.ClaimDue(ctx, now, 16, "live-dispatcher", time.Hour)
	is.NoErr(err)
	var live bool
	for _, c := range claims {
		live = live || c.ID == f.claimed
	}
	is.True(live) // attempt 2, under way

	var stdout, stderr strings.Builder
	e := &env{stdout: &stdout, stderr: &stderr, now: func() time.Time { return now }}
	code := runEnv(ctx, e, []string{"release", "--db", f.path, "--force", "--attempt", "1", f.claimed.String()})
	t.Log(stdout.String(), stderr.String())
	after, err := store.GetOutbox(ctx, f.claimed)
	is.NoErr(err)
	is.Equal(after.Status, turnframe.OutboxDispatching) // the live claim keeps its row
	is.Equal(after.ClaimedBy, "live-dispatcher")
	is.Equal(code, exitUsage)                                                    // refused: the claim looked at is gone
	is.True(strings.Contains(stderr.String(), "attempt 2, not 1"))               // and says why
	is.True(!strings.Contains(stderr.String(), "flag provided but not defined")) // the operator can name the claim
}
