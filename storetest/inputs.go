package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/turnframe/turnframe"
)

// Bad input to the calls of issue 13 (Resolve, History, RecordEvidence,
// a Write's actor and note, a listing cursor's status) is ErrInvalid naming
// its field, and changes nothing.

func inputTests() []test {
	return []test{
		{"ABadResolutionIsInvalidAndChangesNothing", testBadResolutions},
		{"BadHistoryReadsAreInvalid", testBadHistoryReads},
		{"ABadEvidenceRecordIsInvalidAndChangesNothing", testBadEvidence},
		{"AWriteWithABadActorOrNoteIsInvalidAndWritesNothing", testBadWriteActor},
	}
}

// badActors are actors every call refuses: a control character, too long,
// and one that would print as another (a zero-width space, a bidi
// override, a trailing space, a combining grapheme joiner).
var badActors = []struct {
	name  string
	actor turnframe.Actor
}{
	{"ControlCharacter", "app\nx"},
	{"ZeroWidthSpace", "recovery\u200b"},
	{"BidiOverride", "operator:\u202eecila"},
	{"TrailingSpace", "policy "},
	{"GraphemeJoiner", "recovery\u034f"}, // printable, drawn as nothing
	{"Oversize", turnframe.Actor(strings.Repeat("a", turnframe.MaxNameLen+1))},
	{"NotUTF8", "app\xff"},
}

// invalidOp runs op, which must be ErrInvalid naming field, and checks that
// the store did not change.
func (e *env) invalidOp(t *testing.T, field, what string, op func() error) {
	t.Helper()
	before := e.snapshot()
	isInvalid(t, op(), field, what)
	e.unchanged(before, what)
}

func testBadResolutions(t *testing.T, e *env) {
	r, _ := e.rowIn(turnframe.OutboxNeedsIntervention, false)
	good := turnframe.Resolution{ID: r.ID, Verdict: turnframe.VerdictCompleted, Code: "ok", RemoteRef: "ch_1", Actor: turnframe.ActorOperator, Note: "checked", Now: at(time.Hour)}
	long := func(n int) string { return strings.Repeat("x", n) }
	bad := []struct {
		name, field string
		edit        func(res *turnframe.Resolution)
	}{
		{"ZeroID", "id", func(res *turnframe.Resolution) { res.ID = turnframe.OutboxID{} }},
		{"VerdictUnresolved", "verdict", func(res *turnframe.Resolution) { res.Verdict = turnframe.VerdictUnresolved }},
		{"VerdictOutOfRange", "verdict", func(res *turnframe.Resolution) { res.Verdict = turnframe.VerdictEscalate + 1 }},
		{"OversizeCode", "code", func(res *turnframe.Resolution) { res.Code = long(turnframe.MaxNameLen + 1) }},
		{"NonUTF8Code", "code", func(res *turnframe.Resolution) { res.Code = "bad\xff" }},
		{"OversizeRemoteRef", "remote_ref", func(res *turnframe.Resolution) { res.RemoteRef = long(turnframe.MaxRemoteRefLen + 1) }},
		{"OversizeNote", "note", func(res *turnframe.Resolution) { res.Note = long(turnframe.MaxNoteLen + 1) }},
		{"ZeroNow", "now", func(res *turnframe.Resolution) { res.Now = time.Time{} }},
		{"NowBeforeMinTime", "now", func(res *turnframe.Resolution) { res.Now = turnframe.MinTime.Add(-time.Nanosecond) }},
	}
	for _, a := range badActors {
		bad = append(bad, struct {
			name, field string
			edit        func(res *turnframe.Resolution)
		}{"Actor" + a.name, "actor", func(res *turnframe.Resolution) { res.Actor = a.actor }})
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			res := good
			tc.edit(&res)
			e.invalidOp(t, tc.field, tc.name, func() error { return e.s.Resolve(e.ctx, res) })
		})
	}
	t.Run("TheGoodResolutionIsAccepted", func(t *testing.T) {
		if err := e.s.Resolve(e.ctx, good); err != nil {
			t.Fatalf("resolve: %v", err)
		}
	})
}

func testBadHistoryReads(t *testing.T, e *env) {
	turn := e.begin(acme, at(0))
	good := turnframe.TurnSubject(acme, turn)
	for _, limit := range []int{0, -1, turnframe.MaxLimit + 1} {
		_, err := e.s.History(e.ctx, good, 0, limit)
		isInvalid(t, err, "limit", "history limit")
	}
	for _, tc := range badSubjects(good) {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.s.History(e.ctx, tc.subject, 0, 10)
			isInvalid(t, err, tc.field, tc.name)
		})
	}
}

// badSubject is a subject every call refuses, and the field it names.
type badSubject struct {
	name, field string
	subject     turnframe.Subject
}

// badSubjects returns good spoilt in every way Subject.Validate refuses.
func badSubjects(good turnframe.Subject) []badSubject {
	edit := func(f func(s *turnframe.Subject)) turnframe.Subject {
		s := good
		f(&s)
		return s
	}
	return []badSubject{
		{"NoKind", "kind", edit(func(s *turnframe.Subject) { s.Kind = 0 })},
		{"KindOutOfRange", "kind", edit(func(s *turnframe.Subject) { s.Kind = turnframe.SubjectTurn + 1 })},
		{"EmptyAccount", "account", edit(func(s *turnframe.Subject) { s.Account = "" })},
		{"OversizeAccount", "account", edit(func(s *turnframe.Subject) {
			s.Account = turnframe.AccountID(strings.Repeat("a", turnframe.MaxAccountLen+1))
		})},
		{"EmptyRef", "ref", edit(func(s *turnframe.Subject) { s.Ref = "" })},
		{"OversizeRef", "ref", edit(func(s *turnframe.Subject) { s.Ref = strings.Repeat("r", turnframe.MaxKeyLen+1) })},
		{"NonUTF8Ref", "ref", edit(func(s *turnframe.Subject) { s.Ref = "bad\xff" })},
	}
}

func testBadEvidence(t *testing.T, e *env) {
	turn := e.turnIn(acme, turnframe.PhaseDelivered, at(0))
	good := turnframe.NewEvidence(turnframe.TurnSubject(acme, turn), "", turnframe.ActorOperator, "lookup.none", "req-1", "asked the bank", at(time.Hour))
	long := func(n int) string { return strings.Repeat("x", n) }
	type bad struct {
		name, field string
		rec         turnframe.HistoryRecord
	}
	edit := func(f func(r *turnframe.HistoryRecord)) turnframe.HistoryRecord {
		r := good
		f(&r)
		return r
	}
	cases := []bad{
		{"NoActor", "actor", edit(func(r *turnframe.HistoryRecord) { r.Actor = "" })},
		{"OversizeCode", "code", edit(func(r *turnframe.HistoryRecord) { r.Code = long(turnframe.MaxNameLen + 1) })},
		{"OversizeAttempt", "attempt", edit(func(r *turnframe.HistoryRecord) { r.Attempt = long(turnframe.MaxNameLen + 1) })},
		{"OversizeRemoteRef", "remote_ref", edit(func(r *turnframe.HistoryRecord) { r.RemoteRef = long(turnframe.MaxRemoteRefLen + 1) })},
		{"OversizeNote", "note", edit(func(r *turnframe.HistoryRecord) { r.Note = long(turnframe.MaxNoteLen + 1) })},
		{"NonUTF8Note", "note", edit(func(r *turnframe.HistoryRecord) { r.Note = "bad\xff" })},
		{"ZeroAt", "at", edit(func(r *turnframe.HistoryRecord) { r.At = time.Time{} })},
		{"AtAfterMaxTime", "at", edit(func(r *turnframe.HistoryRecord) { r.At = turnframe.MaxTime.Add(time.Nanosecond) })},
	}
	for _, a := range badActors {
		cases = append(cases, bad{"Actor" + a.name, "actor", edit(func(r *turnframe.HistoryRecord) { r.Actor = a.actor })})
	}
	for _, s := range badSubjects(good.Subject) {
		cases = append(cases, bad{"Subject" + s.name, s.field, edit(func(r *turnframe.HistoryRecord) { r.Subject = s.subject })})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e.invalidOp(t, tc.field, tc.name, func() error { return e.s.RecordEvidence(e.ctx, tc.rec) })
		})
	}
	t.Run("FromAndToAreTheStoresToSet", func(t *testing.T) {
		rec := good
		rec.From, rec.To = "", strings.Repeat("x", turnframe.MaxNameLen+1) // would not validate
		if err := e.s.RecordEvidence(e.ctx, rec); err != nil {
			t.Fatalf("record evidence: %v", err)
		}
	})
}

func testBadWriteActor(t *testing.T, e *env) {
	turn := e.begin(acme, at(0))
	good := turnframe.Write{Account: acme, Turn: turn, Now: at(time.Second), Phase: turnframe.PhasePlanned,
		Admit: []turnframe.Command{command(e.freshKey(), "booking/1")}, Actor: "app:intake", Note: "planned"}
	cases := []struct {
		name, field string
		edit        func(w *turnframe.Write)
	}{
		{"OversizeNote", "note", func(w *turnframe.Write) { w.Note = strings.Repeat("n", turnframe.MaxNoteLen+1) }},
		{"NonUTF8Note", "note", func(w *turnframe.Write) { w.Note = "bad\xff" }},
	}
	for _, a := range badActors {
		cases = append(cases, struct {
			name, field string
			edit        func(w *turnframe.Write)
		}{"Actor" + a.name, "actor", func(w *turnframe.Write) { w.Actor = a.actor }})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := good
			tc.edit(&w)
			e.note(w)
			e.invalidOp(t, tc.field, tc.name, func() error { _, err := e.s.Apply(e.ctx, w); return err })
		})
	}
	t.Run("TheGoodWriteIsAccepted", func(t *testing.T) {
		e.note(good)
		if _, err := e.s.Apply(e.ctx, good); err != nil {
			t.Fatalf("apply: %v", err)
		}
	})
}
