// Package difftest runs one sequence of store operations, decoded from fuzz
// input, against memstore and sqlitestore and fails on the first result,
// error class or final state on which they disagree. It has no API: the
// work is in its tests (FuzzStoresAgree).
package difftest
