package difftest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// randomInput draws one input of the random run: 16 to 1,515 bytes.
func randomInput(rng *rand.Rand) []byte {
	in := make([]byte, 16+rng.IntN(1500))
	for j := range in {
		in[j] = byte(rng.Uint32())
	}
	return in
}

// envInt reads a non-negative count from the environment, or def.
func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a count", name, v)
	}
	return n
}

// Random runs Run on random inputs without coverage guidance: go test
// -fuzz instruments the store under test too (modernc.org/sqlite, or the
// driver), which makes each execution slow, so the long differential run
// is this one. Each input is a subtest, on a fresh store of target.
//
//	DIFFTEST_RUNS=n       how many inputs (default runs; 10 with -short or -race, if fewer)
//	DIFFTEST_SEED=s       the seed (default: the clock); it is logged first, so any failure shows it
//	DIFFTEST_INPUT=i      run only input i of the seed: the replay of a divergence
//	DIFFTEST_KEEPGOING=1  do not stop at the first divergence: count them all
//	DIFFTEST_SAVE=1       also write a failing input to testdata/fuzz/FuzzStoresAgree/
//
// A failing input is logged as a corpus file's text, with the command that
// replays it. Only DIFFTEST_SAVE=1 writes it into the source tree, where
// every go test would run it from then on: a plain go test writes nothing
// there.
func Random(t *testing.T, target Target, runs int) {
	if testing.Short() || raceEnabled {
		runs = min(runs, 10)
	}
	runs = envInt(t, "DIFFTEST_RUNS", runs)
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("DIFFTEST_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("DIFFTEST_SEED=%q: %v", v, err)
		}
		seed = n
	}
	t.Logf("DIFFTEST_SEED=%d DIFFTEST_RUNS=%d", seed, runs)
	only := -1
	if os.Getenv("DIFFTEST_INPUT") != "" {
		only = envInt(t, "DIFFTEST_INPUT", 0)
	}
	keepGoing := os.Getenv("DIFFTEST_KEEPGOING") != ""
	rng := rand.New(rand.NewPCG(seed, 2))
	start := time.Now()
	inputs, ops, calls, divergences, first := 0, 0, 0, 0, -1
	for i := range runs {
		in := randomInput(rng)
		if only >= 0 && i != only {
			continue
		}
		inputs++
		ok := t.Run(fmt.Sprintf("input%d", i), func(t *testing.T) {
			r := newRunner(t, in, openWorlds(t, target))
			r.run()
			ops += r.ops
			calls += len(r.log)
		})
		if ok {
			continue
		}
		divergences++
		if first < 0 {
			first = i
		}
		reportFailing(t, seed, i, in)
		if !keepGoing {
			t.Fatalf("seed %d, input %d: the stores disagree (see the subtest)", seed, i)
		}
	}
	firstAt := ""
	if first >= 0 {
		firstAt = fmt.Sprintf(" (the first at input %d)", first)
	}
	t.Logf("seed %d: %d random inputs, %d operations (%d compared calls), %d divergences%s, %.1fs",
		seed, inputs, ops, calls, divergences, firstAt, time.Since(start).Seconds())
}

// reportFailing logs a failing input and how to replay it, and writes it as
// a corpus file of FuzzStoresAgree only when DIFFTEST_SAVE=1 asks for it.
func reportFailing(t *testing.T, seed uint64, i int, in []byte) {
	t.Helper()
	body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", in)
	t.Logf("replay, in this test's package: DIFFTEST_SEED=%d DIFFTEST_RUNS=%d DIFFTEST_INPUT=%d go test -run '^%s$' .", seed, i+1, i, t.Name())
	t.Logf("the input, as a corpus file of FuzzStoresAgree (DIFFTEST_SAVE=1 writes it to testdata/fuzz/FuzzStoresAgree/ of this test's package):\n%s", body)
	if os.Getenv("DIFFTEST_SAVE") != "1" {
		return
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzStoresAgree")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Errorf("save failing input: %v", err)
		return
	}
	name := filepath.Join(dir, fmt.Sprintf("random-%d-%d", seed, i))
	if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
		t.Errorf("save failing input: %v", err)
		return
	}
	t.Logf("failing input saved as %s", name)
}
