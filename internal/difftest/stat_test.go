package difftest_test

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
)

// TestDecoderReachesRealFlows proves the random inputs the differential run
// feeds both stores get past input validation into the states that matter:
// each outcome below must happen at least once in 100 random inputs. A
// decoder that stopped at validation would make the whole differential run
// agree about nothing. Run with -v to see every count.
func TestDecoderReachesRealFlows(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	stats := map[string]int{}
	for range 100 {
		in := make([]byte, 16+rng.IntN(1500))
		for j := range in {
			in[j] = byte(rng.Uint32())
		}
		r := newRunner(t, in, openWorlds(t))
		r.statHook = func(desc string, err error) { stats[strings.Fields(desc)[0]+" "+errClass(err)]++ }
		r.run()
	}
	var lines []string
	for k, v := range stats {
		lines = append(lines, fmt.Sprintf("%-30s %d", k, v))
	}
	sort.Strings(lines)
	t.Log("\n" + strings.Join(lines, "\n"))
	for _, want := range []string{
		"begin ok", "admit ok", "admit Conflict", "executing ok", "commit ok", "commit Conflict",
		"phase ok", "claim ok", "settle ok", "settle ClaimLost", "release ok", "resolve ok",
		"requeue ok", "prune ok", "reconcile ok", "ListUnfinishedTurns ok",
	} {
		if stats[want] == 0 {
			t.Errorf("no random input reached %q", want)
		}
	}
}
