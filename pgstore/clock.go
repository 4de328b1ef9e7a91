package pgstore

import "time"

// Clock names the clock a Store measures leases, due times and cut-offs on
// (WithClock).
type Clock int

const (
	// DatabaseClock, the default, measures every time on the database's
	// clock (clock_timestamp()), whatever the hosts' clocks say. Each call
	// first reads the database's clock and takes the difference from the
	// caller's now (a Write's Now, a claim's or settlement's now; the host
	// clock, WithHostClock, for a call without one) as its offset: every
	// time the caller gives is moved by it into the database's frame before
	// it is stored or compared, and every time the call returns is moved
	// back into the caller's. The stored times are all the database's.
	//
	// So a lease granted to a host whose clock is an hour behind ends, for
	// every host, when the database says it ends: claims and journal takes
	// stay exclusive and no release or expiry comes early, whatever the
	// hosts' clocks. A host that judges its lease by its own clock (as
	// Dispatcher and Runtime.Execute do) sees it end when the database
	// does, clocks running at the same rate. The clock is read before the
	// call waits for any lock, so a call that waits measures from its
	// start: leases end no later than the database says. An Apply or
	// ApplyTx of a Write that is not a Begin reads it in the statement that
	// locks the Write's turn (statement_timestamp(), taken as that
	// statement starts, before its wait for the lock), at no cost; every
	// other call reads it (clock_timestamp()) before its transaction, one
	// more round trip. And a time read back in a later call is the written
	// one moved by how far the two clocks drifted between the calls
	// (microseconds to milliseconds with real clocks).
	DatabaseClock Clock = iota
	// CallerClock measures every time on the times the caller gives, as
	// sqlitestore and memstore do: leases are exclusive only as far as the
	// hosts' clocks agree. It is what the conformance suite runs (storetest
	// steps a fixed clock past leases and compares the times it reads back
	// with the ones it gave, which a real clock under the store would
	// defeat), and what a single-host application may choose to save the
	// round trip.
	CallerClock
)

// String returns "database" or "caller".
func (c Clock) String() string {
	switch c {
	case DatabaseClock:
		return "database"
	case CallerClock:
		return "caller"
	}
	return "Clock(?)"
}

// hostNow reads the host clock (WithHostClock).
func (s *Store) hostNow() time.Time { return s.host() }
