package turnframe

import "context"

// KeeperCadence is keeperCadence, for the test of the keeper's cadence.
var KeeperCadence = keeperCadence

// Release is Run's release of ended claims (Dispatcher.release), for the
// test of what it reads of the clock, and when.
func Release(ctx context.Context, d *Dispatcher) error { return d.release(ctx) }

// Gate is a Dispatcher's claim gate (claimGate), for the test of its waits.
type Gate struct{ g claimGate }

func (g *Gate) Share(ctx context.Context) error { return g.g.share(ctx) }
func (g *Gate) Unshare()                        { g.g.unshare() }
func (g *Gate) Take(ctx context.Context) error  { return g.g.take(ctx) }
func (g *Gate) Give()                           { g.g.give() }

// Waiting reports how many releases hold the gate or wait for it, and
// how many calls wait for it to change.
func (g *Gate) Waiting() (releases, calls int) {
	g.g.mu.Lock()
	defer g.g.mu.Unlock()
	return g.g.alone, g.g.waiters
}
