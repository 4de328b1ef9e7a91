//go:build race

package difftest

// raceEnabled is true in a build with the race detector, which makes
// modernc.org/sqlite some twenty times slower: the default random runs are
// shorter then.
const raceEnabled = true
