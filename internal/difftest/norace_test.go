//go:build !race

package difftest_test

// raceEnabled is true in a build with the race detector (see race_test.go).
const raceEnabled = false
