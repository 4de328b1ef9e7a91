//go:build !race

package difftest

// raceEnabled is true in a build with the race detector (see race.go).
const raceEnabled = false
