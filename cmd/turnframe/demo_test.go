package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
)

// summaryRows parses the demo's summary table into one map per charge,
// column name → cell. The table is aligned by rune, not by byte (the
// charges are in euros), so columns are cut at the header's rune offsets.
func summaryRows(t *testing.T, out string) []map[string]string {
	t.Helper()
	lines := strings.Split(out, "\n")
	start := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "CHARGE ") {
			start = i
		}
	}
	if start < 0 {
		t.Fatalf("no summary table in:\n%s", out)
	}
	header := []rune(lines[start])
	var names []string
	var offsets []int
	for i := 0; i < len(header); i++ {
		if header[i] != ' ' && (i == 0 || (header[i-1] == ' ' && header[i-2] == ' ')) {
			offsets = append(offsets, i)
		}
	}
	for k, off := range offsets {
		end := len(header)
		if k+1 < len(offsets) {
			end = offsets[k+1]
		}
		names = append(names, strings.TrimSpace(string(header[off:end])))
	}
	var rows []map[string]string
	for _, l := range lines[start+1:] {
		if strings.TrimSpace(l) == "" {
			break
		}
		r := []rune(l)
		row := map[string]string{}
		for k, off := range offsets {
			end := len(r)
			if k+1 < len(offsets) {
				end = min(offsets[k+1], len(r))
			}
			if off < len(r) {
				row[names[k]] = strings.TrimSpace(string(r[off:end]))
			}
		}
		rows = append(rows, row)
	}
	return rows
}

func TestDemo(t *testing.T) {
	for _, seed := range []int64{1, 2, 3, 4} {
		t.Run("EveryChargeLandsExactlyOnce_seed"+strconv.FormatInt(seed, 10), func(t *testing.T) {
			is := is.New(t)
			var out bytes.Buffer
			path := filepath.Join(t.TempDir(), "demo.db")
			// A generous send timeout: a loaded machine must not turn a plain send
			// into an unknown one and change the story the assertions read.
			err := runDemo(context.Background(), &out, demoOptions{DBPath: path, Seed: seed, SendTimeout: time.Second})
			is.NoErr(err) // the demo's exit condition: every charge landed exactly once

			rows := summaryRows(t, out.String())
			is.Equal(len(rows), 5) // one line per intended charge
			seen := map[string]bool{}
			for _, r := range rows {
				is.Equal(r["LEDGER"], "1")         // the ledger holds it once
				is.Equal(r["RESENT"], "0")         // never sent again after it landed
				is.Equal(r["STATUS"], "completed") // its outbox row
				is.Equal(r["PHASE"], "delivered")  // its turn
				is.Equal(r["JOURNAL"], "committed")
				seen[r["MISBEHAVIOUR"]] = true
			}
			for _, m := range []string{"refused connection", "503 once", "accept, then hang", "400 once"} {
				is.True(seen[m]) // every misbehaviour happened to some charge
			}
			for _, step := range []string{
				"retryable (http.dial)",                  // the refused connection
				"retryable (http.503)",                   // the 503
				"outcome unknown",                        // the hang, never resent
				"failed, permanent (http.400)",           // the 400
				"process-1 dies after the commit",        // crash before delivery
				"process-1 dies mid-execution",           // crash inside a command
				"the dead attempt's lease on",            // its hold on the command ends before it is resumed
				"regenerate_response",                    // recovery of the first
				"resumed under the same key (attempt 2)", // recovery of the second
				"asked the ledger",                       // reconciliation
				"every charge landed exactly once",
			} {
				is.True(strings.Contains(out.String(), step)) // the narrative shows the step
			}

			// The file it leaves is one the operator commands read.
			code, stdout, _ := cli(t, "status", "--db", path, "--json")
			is.Equal(code, exitOK)
			var st statusJSON
			is.NoErr(json.Unmarshal([]byte(stdout), &st))
			is.Equal(st.Outbox["completed"], 5)
			is.Equal(st.Turns["delivered"], 5)
		})
	}
	t.Run("ThroughTheCommandLine", func(t *testing.T) {
		is := is.New(t)
		path := filepath.Join(t.TempDir(), "cli-demo.db")
		code, stdout, stderr := cli(t, "demo", "--db", path, "--seed", "9", "--send-timeout", "150ms")
		is.Equal(stderr, "")
		is.Equal(code, exitOK)
		is.True(strings.Contains(stdout, "database: "+path))
	})
	t.Run("AnExistingFileIsRefused", func(t *testing.T) {
		is := is.New(t)
		path := filepath.Join(t.TempDir(), "taken.db")
		is.NoErr(os.WriteFile(path, []byte("mine"), 0o644))
		code, _, stderr := cli(t, "demo", "--db", path)
		is.Equal(code, exitUsage)
		is.True(strings.Contains(stderr, "exists"))
		b, err := os.ReadFile(path)
		is.NoErr(err)
		is.Equal(string(b), "mine") // untouched
	})
}
