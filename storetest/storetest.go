// Package storetest is the conformance suite every turnframe.Store must pass:
// one named subtest per rule of the store contract (the turnframe.Store
// interface and the transition rules it names), each on a fresh store.
//
// A store's test is little more than a call to Run, with the store wrapped
// in an AppStore (see memstore's and sqlitestore's app_test.go):
//
//	func TestStore(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) turnframe.Store {
//			s := memstore.New()
//			t.Cleanup(func() { s.Close() })
//			return appStore{s} // PutAppRow, AppRows: the app's rows through its Tx
//		})
//	}
//
// open is called inside each subtest and must return an empty store that it
// closes itself (t.Cleanup), and that is an AppStore: the App subtests write
// the application's own rows through it. Run it with -race: some subtests
// claim from many goroutines.
//
// Semantics change here first. A rule of the contract that a store must obey
// is written down in this suite before any store is changed to obey it, and
// every store is held to it by the same subtest. The suite is written against
// the contract (the root package's doc comments and DESIGN.md), never against
// one store's behaviour; where the contract leaves a choice open, the suite
// does not test it.
//
// Subtest names are the sentences the store makes true, so a failure reads as
// the rule that was broken. Times are fixed (a base time plus offsets); the
// suite never sleeps and never measures a duration.
package storetest

import (
	"testing"

	"github.com/turnframe/turnframe"
)

// test is one rule of the contract: its name is the sentence the store makes
// true, and run proves it against a fresh environment.
type test struct {
	name string
	run  func(t *testing.T, e *env)
}

// Run runs the conformance suite against the stores open returns: one subtest
// per rule, each with a store of its own. A subtest that needs several stores
// (one per row of a table) calls open again.
func Run(t *testing.T, open func(t *testing.T) turnframe.Store) {
	t.Helper()
	var all []test
	all = append(all, turnTests()...)
	all = append(all, inboxTests()...)
	all = append(all, concurrencyTests()...)
	all = append(all, journalTests()...)
	all = append(all, takeTests()...)
	all = append(all, localTests()...)
	all = append(all, adoptionTests()...)
	all = append(all, earlierTests()...)
	all = append(all, advanceTests()...)
	all = append(all, eventTests()...)
	all = append(all, outboxTests()...)
	all = append(all, leaseTests()...)
	all = append(all, opFenceTests()...)
	all = append(all, expireTests()...)
	all = append(all, interventionTests()...)
	all = append(all, approvalTests()...)
	all = append(all, resolveTests()...)
	all = append(all, historyTests()...)
	all = append(all, pagingTests()...)
	all = append(all, inputTests()...)
	all = append(all, rowKeyTests()...)
	all = append(all, orderingTests()...)
	all = append(all, validationTests()...)
	all = append(all, timeTests()...)
	all = append(all, tenancyTests()...)
	all = append(all, lifecycleTests()...)
	all = append(all, appTests()...)
	all = append(all, notifyTests()...)
	for _, tc := range all {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(t, newEnv(t, open))
		})
	}
}
