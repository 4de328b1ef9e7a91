package turnframe

import (
	"context"
	"sync"
)

// claimGate is liveSweeps.gate: a Dispatcher's claims hold it shared, and
// Run's release alone; once a release waits for it, new claims wait behind
// that release. A wait gives up when its context ends, as sync.RWMutex's
// cannot: a release may hold the gate for as long as its catch-up and its
// expiry take (a lock wait, a slow store), and a RunOnce whose context
// ended must return meanwhile.
type claimGate struct {
	mu      sync.Mutex
	shared  int           // claims holding it
	alone   int           // releases holding it or waiting for it
	held    bool          // a release holds it
	waiters int           // calls waiting for a change
	changed chan struct{} // closed at the next change; nil while no one waits
}

// share takes the gate shared, once no release holds it or waits for it,
// or returns ctx's error, holding nothing.
func (g *claimGate) share(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.alone > 0 {
		if err := g.waitLocked(ctx); err != nil {
			return err
		}
	}
	g.shared++
	return nil
}

// unshare gives back a share.
func (g *claimGate) unshare() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shared--; g.shared == 0 {
		g.signalLocked()
	}
}

// take takes the gate alone, once no claim and no other release holds it,
// or returns ctx's error, holding nothing.
func (g *claimGate) take(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.alone++
	for g.shared > 0 || g.held {
		if err := g.waitLocked(ctx); err != nil {
			g.alone--
			g.signalLocked() // claims waiting behind this release may go
			return err
		}
	}
	g.held = true
	return nil
}

// give gives back a take.
func (g *claimGate) give() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.held = false
	g.alone--
	g.signalLocked()
}

// waitLocked waits, without mu, for the gate's next change or for ctx to
// end, and returns with mu held again.
func (g *claimGate) waitLocked(ctx context.Context) error {
	if g.changed == nil {
		g.changed = make(chan struct{})
	}
	ch := g.changed
	g.waiters++
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.waiters--
	}()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// signalLocked wakes every waiter to look at the gate again.
func (g *claimGate) signalLocked() {
	if g.changed != nil {
		close(g.changed)
		g.changed = nil
	}
}
