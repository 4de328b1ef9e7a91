// Package difftest runs one sequence of store operations, decoded from fuzz
// input, against memstore and another store, and fails on the first result,
// error class or final state on which they disagree, and on the first state
// in which two outbox rows of an account share a key.
//
// Its entry points take a Target, which opens the store compared with
// memstore: this package's tests run them on sqlitestore
// (FuzzStoresAgree, TestStoresAgreeRandom), pgstore's on PostgreSQL. It is
// a test library: every entry point takes a *testing.T and fails it.
//
// Random takes DIFFTEST_RUNS, DIFFTEST_SEED (logged first, so a failure
// always shows it), DIFFTEST_INPUT (replay one input of a seed),
// DIFFTEST_KEEPGOING and DIFFTEST_SAVE (write a failing input into the
// calling package's testdata/; a plain go test never writes there).
// DIFFTEST_TRACE=1 logs every operation and its answer.
package difftest
