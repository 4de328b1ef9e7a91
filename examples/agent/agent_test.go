package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// effectRows parses the closing table: one map per ledger row, column
// name → cell (no cell holds a space).
func effectRows(t *testing.T, out string) []map[string]string {
	t.Helper()
	lines := strings.Split(out, "\n")
	start := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "REMOTE ") {
			start = i
		}
	}
	if start < 0 {
		t.Fatalf("no table of effects in:\n%s", out)
	}
	names := strings.Fields(strings.Replace(lines[start], "EXACTLY ONCE", "EXACTLY_ONCE", 1))
	var rows []map[string]string
	for _, l := range lines[start+1:] {
		cells := strings.Fields(l)
		if len(cells) != len(names) {
			break
		}
		row := map[string]string{}
		for i, n := range names {
			row[n] = cells[i]
		}
		rows = append(rows, row)
	}
	return rows
}

func TestAgent(t *testing.T) {
	is := is.New(t)
	var out bytes.Buffer
	err := run(context.Background(), &out, t.TempDir())
	text := out.String()
	is.NoErr(err) // the story holds
	t.Log(text)

	t.Run("every effect happened exactly once at its remote", func(t *testing.T) {
		is := is.New(t)
		rows := effectRows(t, text)
		is.Equal(len(rows), 3) // one effect each: airline, payments, mail
		want := map[string]string{"airline": "m2/c1", "payments": "m2/c2", "mail": "m3/c1"}
		for _, r := range rows {
			is.Equal(r["COMMAND"], want[r["REMOTE"]]) // the effect of the intended command
			is.Equal(r["EFFECTS"], "1")               // exactly once
			is.Equal(r["REQUESTS"], "1")              // nothing was resent
			is.Equal(r["EXACTLY_ONCE"], "yes")        // the table's verdict
		}
	})

	moments := []struct {
		name, line string
		times      int
	}{
		{"the search's results come back from the app's own row", "tool search_flights [m1/c1] → found TP123 at 08:10 for €240.00", 1},
		{"the payment waits for approval", "tool pay [m2/c2] → waiting for the user's approval", 1},
		{"the first process dies before answering", "== process-1 dies: [m2]'s commands committed, its answer never went out", 1},
		{"recovery answers the dead turn from the journal", "assistant (delivered by recovery): TP123 is booked. The payment of €240.00 waits for your approval.", 1},
		{"recovery lists the payment awaiting approval", "recovery: pay [m2/c2] awaits approval", 1},
		{"the resent message is found by its id", "turnframe: [m2] was received before", 1},
		{"the resent message is answered from the first turn", "assistant (again, from the first turn): TP123 is booked. The payment of €240.00 waits for your approval.", 1},
		{"the resent message runs no tool", "model calls book_flight", 1},
		{"the approved payment runs", "Execute runs pay [m2/c2] → committed", 1},
		{"the hung email is unknown, and the model is told not to retry", "tool send_email [m3/c1] → outcome unknown — do not retry; tell the user we are verifying", 1},
		{"the model says it is verifying", "we are verifying, and I will tell you.", 1},
		{"the model never calls send_email again", "model calls send_email", 1},
		{"recovery's lookup settles the email", "recovery: send_email [m3/c1] was outcome unknown; the policy of its verifiable remote: completed (turnframe.policy.verified_happened)", 1},
		{"the user is told", "assistant (follow-up): We verified it: I emailed you the itinerary.", 1},
		{"the verdict", "every effect happened exactly once", 1},
	}
	for _, m := range moments {
		t.Run(m.name, func(t *testing.T) {
			is := is.New(t)
			is.Equal(strings.Count(text, m.line), m.times) // the transcript's line
		})
	}
}

func TestJudge(t *testing.T) {
	tests := []struct {
		name  string
		sends map[string]int // mail key → requests sent to the mail remote
		want  []intended
		fails bool
	}{
		{"once is exactly once", map[string]int{"k1": 1}, []intended{{remoteMail, "k1", "c1", "committed"}}, false},
		{"twice is a problem", map[string]int{"k1": 2}, []intended{{remoteMail, "k1", "c1", "committed"}}, true},
		{"never is a problem", nil, []intended{{remoteMail, "k1", "c1", "committed"}}, true},
		{"an effect nobody intended is a problem", map[string]int{"k2": 1}, nil, true},
		{"an effect turnframe left unknown is a problem", map[string]int{"k1": 1}, []intended{{remoteMail, "k1", "c1", "outcome_unknown"}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			r := newRemotes()
			defer r.Close()
			r.hangs = 0 // no mail request hangs here
			for key, n := range tt.sends {
				for range n {
					_, err := r.post(context.Background(), remoteMail, key, nil)
					is.NoErr(err) // the mail remote answers
				}
			}
			var out bytes.Buffer
			problems := judge(&out, tt.want, r)
			is.Equal(len(problems) > 0, tt.fails) // the verdict
		})
	}
}

func TestScriptedModel(t *testing.T) {
	unknown := []toolResult{{Call: script[askEmail][0], Key: "m3/c1", Status: statusUnknown, Text: unknownAdvice}}
	tests := []struct {
		name   string
		msg    message
		given  []toolResult
		calls  int
		answer string // a part of the answer; "" for none
	}{
		{"a message it has no script for is answered at once", message{ID: "m9", Text: "Hello"}, nil, 0, "Sorry"},
		{"a scripted message calls its tools", msgBook, nil, 2, ""},
		{"an unknown outcome is not retried: the answer says it is verified", msgEmail, unknown, 0, "we are verifying"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			st := scriptedModel{}.Next(tt.msg, tt.given)
			is.Equal(len(st.Calls), tt.calls)               // the tool calls
			is.True(strings.Contains(st.Answer, tt.answer)) // the answer
			is.Equal(st.Answer == "", tt.answer == "")      // an answer exactly when no tools are called
		})
	}
}
