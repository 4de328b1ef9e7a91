package difftest_test

import (
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"testing"
)

// TestDecoderReach logs, per operation and error class, how often random
// inputs reach each outcome on memstore: whether the decoder gets past
// validation into the interesting states. DIFFTEST_STATS=1 to run it.
func TestDecoderReach(t *testing.T) {
	if os.Getenv("DIFFTEST_STATS") == "" {
		t.Skip("set DIFFTEST_STATS=1 to see what random inputs reach")
	}
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
		lines = append(lines, k+" "+strings.Repeat(" ", max(0, 30-len(k)))+itoa(v))
	}
	sort.Strings(lines)
	t.Log("\n" + strings.Join(lines, "\n"))
}

func itoa(n int) string {
	var b []byte
	for n >= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
	}
	return string(append([]byte{byte('0' + n)}, b...))
}
