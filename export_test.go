package turnframe

import "context"

// KeeperCadence is keeperCadence, for the test of the keeper's cadence.
var KeeperCadence = keeperCadence

// Release is Run's release of ended claims (Dispatcher.release), for the
// test of what it reads of the clock, and when.
func Release(ctx context.Context, d *Dispatcher) error { return d.release(ctx) }
