package turnframe

import "context"

// destLimits is a Dispatcher's DestinationLimits at work: one semaphore per
// limited destination, shared by every send the Dispatcher makes. The map
// is built once and never written after, so reading it needs no lock.
type destLimits map[string]chan struct{}

// newDestLimits returns the semaphores for limits; a limit of 0 or less
// is none.
func newDestLimits(limits map[string]int) destLimits {
	l := make(destLimits, len(limits))
	for dest, n := range limits {
		if n > 0 {
			l[dest] = make(chan struct{}, min(n, MaxLimit)) // a larger cap is none: no claim returns more rows
		}
	}
	return l
}

// acquire takes a place among destination's sends, waiting for one, and
// reports whether it got it: false once stop ended first. A destination
// without a limit always has a place.
func (l destLimits) acquire(stop context.Context, destination string) bool {
	sem, ok := l[destination]
	if !ok {
		return stop.Err() == nil
	}
	select {
	case sem <- struct{}{}:
		if stop.Err() != nil { // both were ready: a stopped sweep starts nothing
			<-sem
			return false
		}
		return true
	case <-stop.Done():
		return false
	}
}

// release gives back the place acquire took for destination.
func (l destLimits) release(destination string) {
	if sem, ok := l[destination]; ok {
		<-sem
	}
}
