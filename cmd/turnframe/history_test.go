package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// historyLines returns the table lines of a history command's text output,
// without its title and header.
func historyLines(t *testing.T, out string) []string {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(l, "history of ") || strings.HasPrefix(l, "AT ") || l == "" {
			continue
		}
		lines = append(lines, l)
	}
	return lines
}

// fields splits a table line at runs of two or more spaces.
func fields(line string) []string {
	var out []string
	for _, f := range strings.Split(line, "  ") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func TestHistory(t *testing.T) {
	f := mustFixture(t)
	t.Run("ARowOldestFirst", func(t *testing.T) {
		is := is.New(t)
		code, out, stderr := cli(t, "history", "--db", f.path, f.unknown.String())
		is.Equal(stderr, "")
		is.Equal(code, exitOK)
		is.True(strings.HasPrefix(out, "history of outbox row "+f.unknown.String()+" (account acme, hang, key key-hang, now outcome_unknown):\n"))
		is.True(strings.Contains(out, "AT  ") && strings.Contains(out, "MOVE") && strings.Contains(out, "NOTE"))
		lines := historyLines(t, out)
		is.Equal(len(lines), 3) // enqueued, claimed, unknown
		is.Equal(fields(lines[0])[1:3], []string{"→ pending", "app"})
		is.Equal(fields(lines[1])[1:4], []string{"pending → dispatching", "worker:fixture", "1"})
		is.Equal(fields(lines[2])[1:5], []string{"dispatching → outcome_unknown", "worker:fixture", "1", "http.timeout"})
	})
	t.Run("ATurnsPhases", func(t *testing.T) {
		is := is.New(t)
		code, out, _ := cli(t, "history", "--db", f.path, f.delivered.String())
		is.Equal(code, exitOK)
		is.True(strings.HasPrefix(out, "history of turn "+f.delivered.String()+" (account acme, now delivered):\n"))
		lines := historyLines(t, out)
		is.True(len(lines) >= 3)
		is.Equal(fields(lines[0])[1], "→ received")                               // it began
		is.True(strings.HasSuffix(fields(lines[len(lines)-1])[1], "→ delivered")) // and ended delivered
	})
	t.Run("AJournalEntryByAccountAndKey", func(t *testing.T) {
		is := is.New(t)
		code, out, _ := cli(t, "history", "--db", f.path, "--account", "acme", "key-ask-remote")
		is.Equal(code, exitOK)
		is.True(strings.HasPrefix(out, "history of journal entry key-ask-remote (account acme, command ask-remote, turn "+
			f.unknownDelivered.String()+", now outcome_unknown):\n"))
		lines := historyLines(t, out)
		is.Equal(len(lines), 3) // admitted, taken by an attempt, unknown
		is.Equal(fields(lines[0])[1], "→ pending")
		is.Equal(fields(lines[1])[1], "pending → executing")
		is.Equal(fields(lines[2])[1], "executing → outcome_unknown")
		is.Equal(fields(lines[2])[5], "remote-ref-7") // the reference the handler reported
	})
	t.Run("EvidenceIsMarked", func(t *testing.T) {
		is := is.New(t)
		f := mustFixture(t)
		store := openFixture(t, f)
		subject := turnframe.OutboxSubject(fixtureAccount, f.unknown)
		is.NoErr(store.RecordEvidence(context.Background(), turnframe.NewEvidence(subject, "", turnframe.WorkerActor("fixture"),
			turnframe.CodeLateAnswer, "ch_late", "the send answered after its deadline", f.t0.Add(time.Minute))))
		code, out, _ := cli(t, "history", "--db", f.path, f.unknown.String())
		is.Equal(code, exitOK)
		lines := historyLines(t, out)
		is.Equal(len(lines), 4)
		is.Equal(fields(lines[3])[1:], []string{"evidence (at outcome_unknown)", "worker:fixture", "-", turnframe.CodeLateAnswer,
			"ch_late", "the send answered after its deadline"})

		code, out, _ = cli(t, "history", "--db", f.path, f.unknown.String(), "--json")
		is.Equal(code, exitOK)
		var recs []historyJSON
		is.NoErr(json.Unmarshal([]byte(out), &recs))
		is.Equal(len(recs), 4)
		is.True(recs[3].Evidence)
		is.Equal(recs[3].From, "outcome_unknown") // evidence: from and to are the status it found
		is.Equal(recs[3].To, "outcome_unknown")
		is.True(!recs[2].Evidence)
	})
	t.Run("JSON", func(t *testing.T) {
		is := is.New(t)
		code, out, _ := cli(t, "history", "--db", f.path, f.unknown.String(), "--json")
		is.Equal(code, exitOK)
		var recs []historyJSON
		is.NoErr(json.Unmarshal([]byte(out), &recs))
		is.Equal(len(recs), 3)
		for i, r := range recs {
			is.Equal(r.Subject, "outbox")
			is.Equal(r.Account, "acme")
			is.Equal(r.Ref, f.unknown.String())
			if i > 0 {
				is.True(r.Seq > recs[i-1].Seq) // oldest first
			}
		}
		is.Equal(recs[0].From, "") // the record that created the row
		is.Equal(recs[0].To, "pending")
		is.Equal(recs[2].Code, "http.timeout")
		is.Equal(recs[2].Attempt, "1")
		is.True(strings.HasPrefix(out, "[\n  {\n    \"seq\": ")) // an array, indented as every other --json
		is.True(strings.HasSuffix(out, "\n  }\n]\n"))
	})
	t.Run("AnEntryNeverRun", func(t *testing.T) {
		is := is.New(t)
		code, out, _ := cli(t, "history", "--db", f.path, "--account", "acme", "key-pending-one", "--json")
		is.Equal(code, exitOK)
		var recs []historyJSON
		is.NoErr(json.Unmarshal([]byte(out), &recs))
		is.Equal(len(recs), 1) // admitted, nothing since
		is.Equal(recs[0].Subject, "journal")
		is.Equal(recs[0].To, "pending")
	})
	t.Run("AnUnknownIDExits2", func(t *testing.T) {
		is := is.New(t)
		code, _, stderr := cli(t, "history", "--db", f.path, "01J9Z3K8Q5R6S7T8V9W0X1Y2Z3")
		is.Equal(code, exitUsage)
		is.True(strings.Contains(stderr, "no outbox row or turn has the id 01J9Z3K8Q5R6S7T8V9W0X1Y2Z3"))
	})
	t.Run("AnUnknownKeyExits2", func(t *testing.T) {
		is := is.New(t)
		code, _, stderr := cli(t, "history", "--db", f.path, "--account", "acme", "no-such-key")
		is.Equal(code, exitUsage)
		is.True(strings.Contains(stderr, "account acme has no journal entry under the key no-such-key"))
	})
	t.Run("ANoteCannotForgeARow", func(t *testing.T) {
		is := is.New(t)
		f := mustFixture(t)
		code, _, _ := cli(t, "settle", "--db", f.path, f.unknown.String(), "completed", "--note", "done\n01J9Z3K8Q5R6S7T8V9W0X1Y2Z3  forged")
		is.Equal(code, exitOK)
		code, out, _ := cli(t, "history", "--db", f.path, f.unknown.String())
		is.Equal(code, exitOK)
		is.True(strings.Contains(out, `"done\n01J9Z3K8Q5R6S7T8V9W0X1Y2Z3  forged"`)) // the note, escaped
		for _, line := range strings.Split(out, "\n") {
			is.True(!strings.HasPrefix(line, "01J9Z3K8Q5R6S7T8V9W0X1Y2Z3")) // no forged row
		}
	})
}

// TestHistoryPages proves that history reads the trail a page at a time
// and that the pages make one table and one JSON array: with pages of 2
// records, a trail of 9 prints as with pages of 1000.
func TestHistoryPages(t *testing.T) {
	f := mustFixture(t)
	store := openFixture(t, f)
	subject := turnframe.OutboxSubject(fixtureAccount, f.unknown)
	for i := range 6 { // 3 moves and 6 pieces of evidence: 9 records, 5 pages of 2
		is.New(t).NoErr(store.RecordEvidence(context.Background(), turnframe.NewEvidence(subject, "", turnframe.ActorPolicy,
			turnframe.CodeVerifyUnsure, "", fmt.Sprintf("lookup %d could not tell", i+1), f.t0.Add(time.Duration(i+1)*time.Minute))))
	}
	whole := map[string]string{}
	for _, args := range [][]string{{"history", f.unknown.String()}, {"history", f.unknown.String(), "--json"}, {"show", f.unknown.String(), "--json"}} {
		_, whole[strings.Join(args, " ")], _ = cli(t, append(args, "--db", f.path)...)
	}
	defer func(n int) { historyPage = n }(historyPage)
	historyPage = 2

	t.Run("JSONIsTheSame", func(t *testing.T) {
		is := is.New(t)
		code, out, _ := cli(t, "history", f.unknown.String(), "--json", "--db", f.path)
		is.Equal(code, exitOK)
		is.Equal(out, whole["history "+f.unknown.String()+" --json"]) // byte for byte
		var recs []historyJSON
		is.NoErr(json.Unmarshal([]byte(out), &recs))
		is.Equal(len(recs), 9) // every record, once
		for i := 1; i < len(recs); i++ {
			is.True(recs[i].Seq > recs[i-1].Seq) // in order across pages
		}
	})
	t.Run("ShowJSONIsTheSame", func(t *testing.T) {
		is := is.New(t)
		code, out, _ := cli(t, "show", f.unknown.String(), "--json", "--db", f.path)
		is.Equal(code, exitOK)
		is.Equal(out, whole["show "+f.unknown.String()+" --json"])
		var v struct {
			Kind    string
			History []historyJSON
		}
		is.NoErr(json.Unmarshal([]byte(out), &v))
		is.Equal(v.Kind, "outbox")
		is.Equal(len(v.History), 9)
	})
	t.Run("TextHasEveryRecordOnceUnderOneHeader", func(t *testing.T) {
		is := is.New(t)
		code, out, _ := cli(t, "history", f.unknown.String(), "--db", f.path)
		is.Equal(code, exitOK)
		is.Equal(strings.Count(out, "\nAT "), 1) // one header
		lines := historyLines(t, out)
		is.Equal(len(lines), 9)
		for i := range 6 {
			is.True(strings.Contains(lines[3+i], fmt.Sprintf("lookup %d could not tell", i+1))) // in order
		}
		is.Equal(len(historyLines(t, whole["history "+f.unknown.String()])), 9)
	})
	t.Run("NoPageIsLargerThanThePageSize", func(t *testing.T) {
		is := is.New(t)
		spy := &pageSpy{HistoryStore: store}
		var got []turnframe.HistoryRecord
		err := eachHistoryPage(context.Background(), spy, subject, func(page []turnframe.HistoryRecord) error {
			is.True(len(page) <= historyPage) // never more than a page held
			got = append(got, page...)
			return nil
		})
		is.NoErr(err)
		is.Equal(len(got), 9)
		is.Equal(spy.limits, []int{2, 2, 2, 2, 2}) // 2+2+2+2+1: the short page ends it
	})
}

// pageSpy records the limit of every History call.
type pageSpy struct {
	turnframe.HistoryStore
	limits []int
}

func (s *pageSpy) History(ctx context.Context, subject turnframe.Subject, after int64, limit int) ([]turnframe.HistoryRecord, error) {
	s.limits = append(s.limits, limit)
	return s.HistoryStore.History(ctx, subject, after, limit)
}

func TestShowHistory(t *testing.T) {
	f := mustFixture(t)
	t.Run("ARowEndsWithItsHistory", func(t *testing.T) {
		is := is.New(t)
		code, out, _ := cli(t, "show", "--db", f.path, f.unknown.String())
		is.Equal(code, exitOK)
		_, hist, ok := strings.Cut(out, "\nhistory:\n")
		is.True(ok) // the history comes last
		lines := historyLines(t, hist)
		is.Equal(len(lines), 3)
		is.Equal(fields(lines[2])[1], "dispatching → outcome_unknown")
	})
	t.Run("ATurnEndsWithItsPhases", func(t *testing.T) {
		is := is.New(t)
		code, out, _ := cli(t, "show", "--db", f.path, f.delivered.String())
		is.Equal(code, exitOK)
		is.True(strings.Contains(out, "history of the turn's phase (each command's own: 'turnframe history --account acme KEY'):"))
		is.True(strings.Contains(out, "→ received"))
	})
	t.Run("JSONHoldsTheHistory", func(t *testing.T) {
		is := is.New(t)
		code, out, _ := cli(t, "show", "--db", f.path, f.delivered.String(), "--json")
		is.Equal(code, exitOK)
		var v struct {
			Kind    string
			Journal []entryJSON
			History []historyJSON
		}
		is.NoErr(json.Unmarshal([]byte(out), &v))
		is.Equal(v.Kind, "turn")
		is.Equal(len(v.Journal), 6) // the rest of show is unchanged
		is.True(len(v.History) >= 3)
		is.Equal(v.History[0].Subject, "turn")
		is.Equal(v.History[0].To, "received")
		is.Equal(v.History[len(v.History)-1].To, "delivered")
	})
}

func TestJSONArray(t *testing.T) {
	t.Run("StreamsAsWriteJSONWrites", func(t *testing.T) {
		is := is.New(t)
		for _, list := range [][]map[string]any{{}, {{"a": 1}}, {{"a": 1}, {"b": []int{2}}}} {
			var whole, streamed strings.Builder
			is.NoErr(writeJSON(&whole, list))
			arr := newJSONArray(&streamed, "")
			for _, v := range list {
				is.NoErr(arr.add(v))
			}
			is.NoErr(arr.close())
			streamed.WriteString("\n")
			is.Equal(streamed.String(), whole.String()) // the same bytes, an element at a time
		}
	})
	t.Run("AsAFieldOfAnObject", func(t *testing.T) {
		is := is.New(t)
		for _, list := range [][]int{{}, {1, 2}} {
			var whole, streamed strings.Builder
			is.NoErr(writeJSON(&whole, map[string]any{"kind": "x", "list": list}))
			is.NoErr(writeJSONWithArray(&streamed, map[string]any{"kind": "x"}, "list", func(arr *jsonArray) error {
				for _, v := range list {
					if err := arr.add(v); err != nil {
						return err
					}
				}
				return nil
			}))
			is.Equal(streamed.String(), whole.String())
		}
	})
}
