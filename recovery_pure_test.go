package turnframe_test

import (
	"testing"
	"unicode/utf8"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

func question(start, end int, basis turnframe.AnswerBasis) *turnframe.ReplayRecord {
	return &turnframe.ReplayRecord{
		LoadedCases: []turnframe.CaseKey{"booking/42"},
		Understanding: &turnframe.Understanding{Questions: []turnframe.UnderstoodQuestion{{
			Unit: 2, Words: turnframe.WordRange{First: 1, Last: 4, Start: start, End: end}, Basis: basis,
		}}},
	}
}

func TestAnswerTasksOf(t *testing.T) {
	t.Run("CutsTheQuestionByByteRange", func(t *testing.T) {
		is := is.New(t)
		tasks := turnframe.AnswerTasksOf(question(6, 29, turnframe.BasisCommittedStateAfterTurn), "done. why the loyalty number?")
		is.Equal(len(tasks), 1)
		is.Equal(tasks[0].Question, "why the loyalty number?")
		is.Equal(tasks[0].Basis, turnframe.BasisCurrentCommittedState) // after commit, the state after the turn is the state now
		is.Equal(tasks[0].Sources, turnframe.SourcesAuthoritative)
		is.Equal(tasks[0].Cases, []turnframe.CaseKey{"booking/42"})
	})
	t.Run("GeneralKnowledgeStaysAndTakesAnySource", func(t *testing.T) {
		is := is.New(t)
		tasks := turnframe.AnswerTasksOf(question(0, 4, turnframe.BasisGeneralDomainKnowledge), "why?")
		is.Equal(tasks[0].Basis, turnframe.BasisGeneralDomainKnowledge)
		is.Equal(tasks[0].Sources, turnframe.SourcesAny)
	})
	bad := []struct {
		name       string
		start, end int
	}{
		{"OutOfBounds", 6, 99},
		{"Negative", -1, 3},
		{"Reversed", 10, 6},
		{"OffAUTF8Boundary", 1, 4}, // "é" is bytes 3 and 4: byte 4 is inside it
	}
	for _, c := range bad {
		t.Run("ABadRangeGivesAnEmptyQuestion_"+c.name, func(t *testing.T) {
			is := is.New(t)
			tasks := turnframe.AnswerTasksOf(question(c.start, c.end, turnframe.BasisCurrentCommittedState), "café: où est-il?")
			is.Equal(len(tasks), 1)
			is.Equal(tasks[0].Question, "")
		})
	}
	t.Run("NoRecordNoTasks", func(t *testing.T) {
		is := is.New(t)
		is.Equal(len(turnframe.AnswerTasksOf(nil, "x")), 0)
		is.Equal(len(turnframe.AnswerTasksOf(&turnframe.ReplayRecord{}, "x")), 0)
	})
}

func FuzzAnswerTasksOf(f *testing.F) {
	f.Add("done. why the loyalty number?", 6, 29)
	f.Add("café", 3, 4)
	f.Add("", 0, 0)
	f.Add("\xff\xfe", 0, 1)
	f.Fuzz(func(t *testing.T, text string, start, end int) {
		tasks := turnframe.AnswerTasksOf(question(start, end, turnframe.BasisCurrentCommittedState), text)
		if len(tasks) != 1 {
			t.Fatalf("got %d tasks, want 1", len(tasks))
		}
		q := tasks[0].Question
		if q != "" && (start < 0 || end > len(text) || text[start:end] != q) {
			t.Fatalf("question %q is not text[%d:%d]", q, start, end)
		}
		if utf8.ValidString(text) && !utf8.ValidString(q) {
			t.Fatalf("question %q of valid text is not valid UTF-8", q)
		}
	})
}

func TestCommittedEventIDs(t *testing.T) {
	is := is.New(t)
	gen := turnframe.NewIDGenerator()
	e1, e2, e3 := gen.EventID(t0), gen.EventID(t0), gen.EventID(t0)
	entries := []turnframe.JournalEntry{
		{Status: turnframe.JournalCommitted, EventIDs: []turnframe.EventID{e1, e2}},
		{Status: turnframe.JournalRejected},
		{Status: turnframe.JournalCommitted, EventIDs: []turnframe.EventID{e3}},
	}
	is.Equal(turnframe.CommittedEventIDs(entries), []turnframe.EventID{e1, e2, e3})
}

func TestOnlyResumingCommandsMayCauseEffects(t *testing.T) {
	for k := turnframe.ActionNothing; k <= turnframe.ActionReconcileExternal; k++ {
		t.Run(k.String(), func(t *testing.T) {
			is := is.New(t)
			is.Equal(turnframe.RecoveryAction{Kind: k}.MayCauseEffects(), k == turnframe.ActionResumeCommands)
		})
	}
}
