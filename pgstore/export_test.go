package pgstore

import "context"

// ClaimSQL is claimSQL, for the plan test.
const ClaimSQL = claimSQL

// Translate is translate, for the error tests.
var Translate = translate

// RunInTx runs f in the store's write transaction loop (inTx), telling f
// which try it is (0 first) and marking the App as run when app is set,
// for the retry tests.
func RunInTx(s *Store, ctx context.Context, app bool, f func(try int) error) error {
	try := 0
	return s.inTx(ctx, "test", func(tx *wtx) error {
		tx.appRan = app
		defer func() { try++ }()
		return f(try)
	})
}
