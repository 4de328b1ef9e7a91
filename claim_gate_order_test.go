package turnframe_test

import (
	"context"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// claimGate's doc: "once a release waits for it, new claims wait behind
// that release". A claim that waits behind a release is woken by any
// change of the gate, here the last claim giving its share back: it must
// look again and go on waiting while the release waits, not take a share
// that holds the release up behind it.
func TestAClaimWokenWhileAReleaseWaitsGoesOnWaiting(t *testing.T) {
	is := is.New(t)
	var g turnframe.Gate
	took := releaseBehindAClaim(t, &g, context.Background()) // a claim holds it, a release waits
	shared := make(chan error, 1)
	go func() { shared <- g.Share(context.Background()) }() // a new claim, behind the release
	eventually(t, "the new claim waits", func() bool { _, w := g.Waiting(); return w == 2 })
	g.Unshare() // the first claim gives it back: both waiters wake
	select {
	case err := <-took:
		is.NoErr(err) // the release took the gate
	case <-shared:
		g.Unshare()
		t.Fatal("the new claim took a share ahead of the release waiting for the gate")
	}
	select {
	case <-shared:
		t.Fatal("a claim shares the gate the release holds")
	default:
	}
	g.Give()
	is.NoErr(await(t, shared, "the claim behind the release")) // goes once the release gave it back
	g.Unshare()
}

// give: a claim that waits while a release holds the gate goes once the
// release gives it back, with nothing else changing meanwhile.
func TestAClaimWaitingForAHeldGateGoesWhenItIsGivenBack(t *testing.T) {
	is := is.New(t)
	var g turnframe.Gate
	is.NoErr(g.Take(context.Background())) // a release holds it
	shared := make(chan error, 1)
	go func() { shared <- g.Share(context.Background()) }()
	eventually(t, "the claim waits", func() bool { _, w := g.Waiting(); return w == 1 })
	g.Give()
	is.NoErr(await(t, shared, "the claim once the gate was given back"))
	g.Unshare()
}
