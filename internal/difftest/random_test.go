package difftest_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestStoresAgreeRandom runs FuzzStoresAgree's body on random inputs
// without coverage guidance: go test -fuzz instruments modernc.org/sqlite
// too, which makes each execution slow, so the long differential run is
// this one. DIFFTEST_RUNS sets how many inputs (default 50, 10 in -short),
// DIFFTEST_SEED the seed (default: the clock; it is logged). A failing
// input is written to testdata/fuzz/FuzzStoresAgree/, where every go test
// runs it from then on.
func TestStoresAgreeRandom(t *testing.T) {
	runs := 50
	if testing.Short() {
		runs = 10
	}
	if v := os.Getenv("DIFFTEST_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			t.Fatalf("DIFFTEST_RUNS=%q: want a count", v)
		}
		runs = n
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("DIFFTEST_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("DIFFTEST_SEED=%q: %v", v, err)
		}
		seed = n
	}
	rng := rand.New(rand.NewPCG(seed, 2))
	ops := 0
	for i := range runs {
		in := make([]byte, 16+rng.IntN(1500))
		for j := range in {
			in[j] = byte(rng.Uint32())
		}
		ok := t.Run(fmt.Sprintf("input%d", i), func(t *testing.T) {
			r := newRunner(t, in, openWorlds(t))
			r.run()
			ops += r.ops
		})
		if !ok {
			saveCorpus(t, in)
			t.Fatalf("seed %d, input %d: the stores disagree (see the subtest)", seed, i)
		}
	}
	t.Logf("seed %d: %d random inputs, %d operations, no divergence", seed, runs, ops)
}

// saveCorpus writes in as a go fuzz corpus file of FuzzStoresAgree.
func saveCorpus(t *testing.T, in []byte) {
	dir := filepath.Join("testdata", "fuzz", "FuzzStoresAgree")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Logf("save failing input: %v", err)
		return
	}
	name := filepath.Join(dir, fmt.Sprintf("random-%d", time.Now().UnixNano()))
	body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", in)
	if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
		t.Logf("save failing input: %v", err)
		return
	}
	t.Logf("failing input saved as %s", name)
}
