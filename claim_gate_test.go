package turnframe_test

import (
	"context"
	"errors"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// The claim gate's waits, each of which a wrong gate turns into a claim
// that hangs or a release that runs beside a claim: a release waits for
// the claims that hold the gate, new claims wait behind a waiting release,
// and either wait ends with its context, letting the others go.
func TestTheClaimGate(t *testing.T) {
	t.Run("AReleaseWaitsForAClaimAndTakesTheGateWhenItIsGivenBack", func(t *testing.T) {
		is := is.New(t)
		var g turnframe.Gate
		took := releaseBehindAClaim(t, &g, context.Background())
		select {
		case <-took:
			t.Fatal("the release took the gate a claim holds")
		default:
		}
		g.Unshare()
		is.NoErr(await(t, took, "the release")) // taken once the claim gave it back
		g.Give()
	})
	t.Run("AClaimWaitsBehindAWaitingReleaseAndGivesUpWithItsContext", func(t *testing.T) {
		is := is.New(t)
		var g turnframe.Gate
		took := releaseBehindAClaim(t, &g, context.Background())
		ctx, cancel := context.WithCancel(context.Background())
		shared := make(chan error, 1)
		go func() { shared <- g.Share(ctx) }()
		cancel()
		is.True(errors.Is(<-shared, context.Canceled)) // gave up, holding nothing
		g.Unshare()
		is.NoErr(await(t, took, "the release")) // not held up by the claim that gave up
		g.Give()
		is.NoErr(g.Share(context.Background())) // and the gate is free again
		g.Unshare()
	})
	t.Run("AReleaseThatGivesUpLetsTheClaimsBehindItGo", func(t *testing.T) {
		is := is.New(t)
		var g turnframe.Gate
		ctx, cancel := context.WithCancel(context.Background())
		took := releaseBehindAClaim(t, &g, ctx)
		shared := make(chan error, 1)
		go func() { shared <- g.Share(context.Background()) }() // behind the release
		eventually(t, "the claim waits behind it", func() bool { _, w := g.Waiting(); return w == 2 })
		cancel()
		is.True(errors.Is(<-took, context.Canceled))               // the release gave up
		is.NoErr(await(t, shared, "the claim behind the release")) // went
		releases, _ := g.Waiting()
		is.Equal(releases, 0)
		g.Unshare()
		g.Unshare()
	})
}

// releaseBehindAClaim has a claim share g, then starts a release under ctx
// and returns, once the release waits for the claim, where its answer
// comes.
func releaseBehindAClaim(t *testing.T, g *turnframe.Gate, ctx context.Context) <-chan error {
	t.Helper()
	if err := g.Share(context.Background()); err != nil {
		t.Fatal(err)
	}
	took := make(chan error, 1)
	go func() { took <- g.Take(ctx) }()
	eventually(t, "the release waits", func() bool { r, w := g.Waiting(); return r == 1 && w == 1 })
	return took
}
