package turnframe

import "sync"

// liveSweeps is the set of a Dispatcher's sweeps that are running, RunOnce's
// and Run's alike, so that Run's release can bring their leases up to the
// clock before it expires ended claims (catchUp).
//
// gate keeps a claim and that release apart: a claim holds it shared from
// its clock reading until its sweep is in the set (Dispatcher.claimLive),
// the release alone from its clock reading through its expiry
// (Dispatcher.expireLive). Without it a claim made before a forward step
// of the wall clock, and not yet in the set, was expired by a release on
// the stepped clock: never sent, yet escalated as a send that may have
// left.
type liveSweeps struct {
	gate claimGate

	mu  sync.Mutex
	set map[*sweep]struct{}
}

func (l *liveSweeps) add(sw *sweep) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.set == nil {
		l.set = make(map[*sweep]struct{})
	}
	l.set[sw] = struct{}{}
}

func (l *liveSweeps) remove(sw *sweep) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.set, sw)
}

// catchUp extends, before a release, the leases of every live sweep whose
// rows' leases end within half a lease margin. The keeper keeps them
// further ahead than that; only a wall clock stepped forward (a resumed
// machine, an NTP step) brings them so near, and the keeper follows the
// step only at its next look, up to a second later (stepCheck), after
// Run's release, every poll, would have taken the rows of its live sends.
// A sweep whose caller's context ended is not extended: its leases are
// moved only to where they end on the real clock (followStep), as its
// keeper does at its next look. Other releases are not held up: see
// DESIGN.md, "One clock".
func (l *liveSweeps) catchUp() {
	l.mu.Lock()
	sweeps := make([]*sweep, 0, len(l.set))
	for sw := range l.set {
		sweeps = append(sweeps, sw)
	}
	l.mu.Unlock()
	for _, sw := range sweeps {
		open, settling := sw.endsSoon()
		if sw.ctx.Err() != nil {
			if open || settling {
				sw.followStep() // no longer extended, but not cut short by a step
			}
			continue
		}
		if open {
			sw.extend()
		}
		// A send that is over, its settlement being written; and a row
		// that turned settling since endsSoon looked, which extend, picking
		// the rows not settling, passed over (extendSettling picks afresh,
		// and writes nothing when no settling row ends soon).
		if open || settling {
			sw.extendSettling()
		}
	}
}
