package turnframe

import (
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Actor names who made a transition, as the audit trail records it. The
// forms turnframe writes are a worker ("worker:" and its WorkerID),
// ActorRecovery, ActorPolicy, ActorOperator (the CLI), and ActorApp, the
// default for a Write that names no actor. An application may name its own
// ("app:billing-ui", "operator:alice"): 1–200 bytes of UTF-8, each rune
// printable as it is and drawn visibly, and no space at either end
// (Validate). An actor is
// who the writer says it is: the trail does not authenticate it, but no
// actor can look like another where it is shown unescaped — a zero-width
// space, a bidi override or a trailing space would make "recovery\u200b",
// "operator:\u202eecila" or "recovery " print as turnframe's own recovery or
// as another person.
type Actor string

// The actors turnframe writes on its own.
const (
	// ActorApp is the actor of a Write that names none: the application,
	// through Runtime or a direct Store.Apply.
	ActorApp Actor = "app"
	// ActorRecovery moves what a crash left: claims whose lease ended,
	// attempts that died.
	ActorRecovery Actor = "recovery"
	// ActorPolicy resolves unknown outcomes by what a Remote can do.
	ActorPolicy Actor = "policy"
	// ActorOperator is a person at the CLI.
	ActorOperator Actor = "operator"
)

// WorkerActor returns the actor of a dispatcher claiming under workerID.
func WorkerActor(workerID string) Actor { return Actor(workerPrefix + workerID) }

// workerPrefix begins the actor of every dispatch worker.
const workerPrefix = "worker:"

// Validate returns ErrInvalid unless a is 1–200 bytes of UTF-8 whose every
// rune is printable (strconv.IsPrint: a letter, mark, number, punctuation,
// symbol or the ASCII space — no control or format character such as a
// zero-width space or a bidi override, no other space, no private-use or
// unassigned code point) and visible (not drawnBlank: no combining
// grapheme joiner, variation selector or Hangul filler, which
// strconv.IsPrint takes but a terminal draws as nothing or as a blank), and
// that neither begins nor ends with a space.
// Records an earlier release kept with other actors still read as they
// are; only new writes are checked.
func (a Actor) Validate() error {
	if err := checkString("actor", string(a), 1, MaxNameLen); err != nil {
		return err
	}
	s := string(a)
	if i := strings.IndexFunc(s, func(r rune) bool { return !strconv.IsPrint(r) || drawnBlank(r) }); i >= 0 {
		return invalid("actor", "%+q holds a character that does not print as itself at byte %d", s, i)
	}
	if strings.HasPrefix(s, " ") || strings.HasSuffix(s, " ") {
		return invalid("actor", "%q begins or ends with a space", s)
	}
	return nil
}

// drawnBlank reports whether r is one strconv.IsPrint takes as printable
// but that a terminal or a browser draws as nothing, or as a blank a
// reader cannot tell from none: Unicode's default-ignorable code points
// that are not format characters (the combining grapheme joiner U+034F, the
// Hangul fillers U+115F, U+1160, U+3164 and U+FFA0, U+17B4 and U+17B5), the
// variation selectors (U+FE00–U+FE0F, U+E0100–U+E01EF, U+180B–U+180D and
// U+180F) and the Braille blank U+2800. "recovery\u034f" and
// "policy\ufe0f" would print as turnframe's own recovery and policy.
func drawnBlank(r rune) bool {
	return r == '\u2800' || unicode.In(r, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector)
}

// MayIntervene reports whether a may move an entry or a row out of
// NeedsIntervention: the application or a person, never turnframe's own
// recovery, policy or dispatch workers.
func (a Actor) MayIntervene() bool {
	switch {
	case a == ActorRecovery || a == ActorPolicy:
		return false
	case strings.HasPrefix(string(a), workerPrefix):
		return false
	}
	return true
}

// orApp returns a, or ActorApp when a is empty.
func (a Actor) orApp() Actor {
	if a == "" {
		return ActorApp
	}
	return a
}

// SubjectKind is what a history record is about.
type SubjectKind uint8

const (
	subjectUnset SubjectKind = iota
	// SubjectJournal: a command's journal entry, named by its key.
	SubjectJournal
	// SubjectOutbox: an outbox row, named by its id.
	SubjectOutbox
	// SubjectTurn: a turn's phase, named by the turn's id.
	SubjectTurn
)

var subjectNames = [...]string{"unset", "journal", "outbox", "turn"}

// String returns the kind in snake case: "journal", "outbox" or "turn".
func (k SubjectKind) String() string { return enumName(subjectNames[:], int(k), "subject kind") }

// ParseSubjectKind returns the kind named s, or ErrInvalid.
func ParseSubjectKind(s string) (SubjectKind, error) {
	n, err := enumParse(subjectNames[:], s, "subject kind")
	return SubjectKind(n), err
}

// Subject names one thing with a history: a journal entry (Account and its
// key as Ref), an outbox row (Account and its id as Ref) or a turn (Account
// and its id as Ref).
type Subject struct {
	Kind    SubjectKind
	Account AccountID
	Ref     string
}

// JournalSubject returns the subject of the entry admitted under key.
func JournalSubject(account AccountID, key IdempotencyKey) Subject {
	return Subject{Kind: SubjectJournal, Account: account, Ref: string(key)}
}

// OutboxSubject returns the subject of an outbox row.
func OutboxSubject(account AccountID, id OutboxID) Subject {
	return Subject{Kind: SubjectOutbox, Account: account, Ref: id.String()}
}

// TurnSubject returns the subject of a turn's phase.
func TurnSubject(account AccountID, turn TurnID) Subject {
	return Subject{Kind: SubjectTurn, Account: account, Ref: turn.String()}
}

// Validate returns ErrInvalid unless s names a subject: a kind, a valid
// account and a reference of 1–255 bytes.
func (s Subject) Validate() error {
	if s.Kind == subjectUnset || s.Kind > SubjectTurn {
		return invalid("subject.kind", "%v is not a subject kind", s.Kind)
	}
	if err := s.Account.Validate(); err != nil {
		return prefixed("subject", err)
	}
	return prefixed("subject", checkString("ref", s.Ref, 1, MaxKeyLen))
}

// HistoryRecord is one line of the audit trail: a transition of a journal
// entry, an outbox row or a turn's phase, written in the transaction that
// made it; or a piece of evidence (From equals To, Evidence true) that moved
// nothing, such as an answer that came after its deadline, or a lookup that
// could not tell.
type HistoryRecord struct {
	Subject
	Seq      int64  // the store's order of records: increasing, per store
	From, To string // status or phase names; From is "" when the subject was created
	Evidence bool   // it moved nothing
	// Attempt is, for a journal entry, the attempt id involved (empty for
	// a reconciliation); for an outbox row, the attempt number.
	Attempt   string
	Actor     Actor
	Code      string // the transition's code, if any
	RemoteRef string // the remote's reference, if any
	Note      string // free text for a person: why (at most 1024 bytes)
	At        time.Time
}

// MaxNoteLen is the most bytes a history record's note keeps.
const MaxNoteLen = 1024

// Validate returns ErrInvalid unless r is a record a store keeps: a valid
// subject, status names, an actor, codes and note within their sizes and a
// time in range. Seq is the store's and is not checked.
func (r HistoryRecord) Validate() error {
	if err := r.Subject.Validate(); err != nil {
		return err
	}
	if err := checkString("to", r.To, 1, MaxNameLen); err != nil {
		return err
	}
	if err := checkString("from", r.From, 0, MaxNameLen); err != nil {
		return err
	}
	if err := r.Actor.Validate(); err != nil {
		return err
	}
	for _, f := range []struct {
		name, v string
		max     int
	}{{"attempt", r.Attempt, MaxNameLen}, {"code", r.Code, MaxNameLen}, {"remote_ref", r.RemoteRef, MaxRemoteRefLen}, {"note", r.Note, MaxNoteLen}} {
		if err := checkString(f.name, f.v, 0, f.max); err != nil {
			return err
		}
	}
	return CheckTime("at", r.At)
}

// NewEvidence returns a record of something learnt about subject that moves
// nothing: status is its status now (From and To), and note says what was
// learnt. Store.RecordEvidence writes it. remoteRef and note often come from
// application code (a late answer, a Verifier's words): they are made
// keepable — invalid UTF-8 and NUL bytes replaced by U+FFFD, cut to their
// limits — so that what was learnt is recorded rather than refused.
func NewEvidence(subject Subject, status string, actor Actor, code, remoteRef, note string, at time.Time) HistoryRecord {
	return HistoryRecord{Subject: subject, From: status, To: status, Evidence: true,
		Actor: actor, Code: code, RemoteRef: keepable(remoteRef, MaxRemoteRefLen), Note: keepable(note, MaxNoteLen), At: at}
}

// keepable returns s as a store keeps text, for words that come from
// application code and must not refuse the record they belong to (a
// Verifier's note, a late answer's reference): invalid UTF-8 and NUL bytes
// become U+FFFD, and the result is clipped to n bytes.
func keepable(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	return clip(s, n)
}

// clip cuts s to at most n bytes, on a UTF-8 boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !boundary(s, n) {
		n--
	}
	return s[:n]
}
