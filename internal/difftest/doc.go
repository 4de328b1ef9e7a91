// Package difftest runs one sequence of store operations, decoded from fuzz
// input, against memstore and sqlitestore and fails on the first result,
// error class or final state on which they disagree, and on the first state
// in which two outbox rows of an account share a key. It has no API: the
// work is in its tests (FuzzStoresAgree, TestStoresAgreeRandom).
//
// The random run takes DIFFTEST_RUNS, DIFFTEST_SEED (logged first, so a
// failure always shows it), DIFFTEST_INPUT (replay one input of a seed),
// DIFFTEST_KEEPGOING and DIFFTEST_SAVE (write a failing input into
// testdata/; a plain go test never writes there). DIFFTEST_TRACE=1 logs
// every operation and its answer.
package difftest
