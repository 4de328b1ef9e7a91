package turnframe

// AdmissionKind says what Runtime.Plan did with one command of a plan: it
// admitted it now, or its key had been admitted before — by this turn, by
// another turn, or by an abandoned turn this one adopted it from. The zero
// value is not a kind Plan reports.
type AdmissionKind uint8

const (
	admissionUnset AdmissionKind = iota
	// AdmittedNow: the key was new; this Plan admitted the command Pending
	// in this turn, and Execute of this turn runs it.
	AdmittedNow
	// AdmittedByThisTurn: an earlier Plan of this same turn admitted the
	// key (this Plan repeats it, as one does after a crash; a repeat admits
	// nothing new, see Runtime.Plan). The entry is
	// this turn's as it stands: Execute of this turn runs it if it is
	// still pending, and never runs a settled one again.
	AdmittedByThisTurn
	// AdmittedByAnotherTurn: another turn admitted the key — a repeated
	// message. The entry stays that turn's (Entry.Turn), whatever its
	// status, and Execute of this turn never runs it: answer from Entry
	// ("done at Entry.UpdatedAt" when Committed, Entry.Code when Rejected,
	// "being verified" when OutcomeUnknown or NeedsIntervention, "in
	// progress" when Pending or Executing). Should that turn be abandoned
	// before its entry ran, nothing runs it and recovery does not list it:
	// the next plan of the command adopts it (AdoptedFromAbandoned). An
	// application that abandons turns should plan again what it told the
	// user was in progress.
	AdmittedByAnotherTurn
	// AdoptedFromAbandoned: a turn that was abandoned (Admission.From)
	// admitted the key and the command never settled there (Pending, or
	// Executing with its lease ended: its attempt died and may have acted,
	// Entry.Attempts says how often it started). This turn adopted it
	// (storekit.Readmit): the entry is now this turn's, and Execute of this turn
	// runs it, under the same key.
	AdoptedFromAbandoned
)

var admissionNames = [...]string{"unset", "admitted_now", "admitted_by_this_turn", "admitted_by_another_turn", "adopted_from_abandoned"}

// String returns the kind in snake case ("admitted_now", …).
func (k AdmissionKind) String() string { return enumName(admissionNames[:], int(k), "admission") }

// Admission is what Runtime.Plan did with one command of a plan, read in
// the transaction that admitted it.
type Admission struct {
	Kind AdmissionKind
	// Entry is the command's journal entry as stored after the Plan: its
	// Turn is the turn it belongs to now (this turn, except for
	// AdmittedByAnotherTurn), its Status what became of it so far, its
	// AdmittedAt when the key was first admitted.
	Entry JournalEntry
	// From is the turn the key's entry belonged to before this Plan: zero
	// for AdmittedNow, this turn for AdmittedByThisTurn, Entry.Turn for
	// AdmittedByAnotherTurn, and the abandoned turn for
	// AdoptedFromAbandoned.
	From TurnID
}

// Repeated reports whether the key had been admitted before this Plan:
// every kind but AdmittedNow.
func (a Admission) Repeated() bool { return a.Kind != AdmittedNow }

// PlanReport is what Runtime.Plan admitted: one Admission per command of
// the plan, in the plan's order.
type PlanReport struct {
	Admissions []Admission
}

// Entries returns the journal entry of each admission, in the plan's order.
func (r PlanReport) Entries() []JournalEntry {
	entries := make([]JournalEntry, len(r.Admissions))
	for i, a := range r.Admissions {
		entries[i] = a.Entry
	}
	return entries
}

// admissionOf says what admitting a command into turn did, from the entry
// its key had before the Write (earlier, zero when none: Applied.Earlier)
// and the entry as the Write left it (Applied.Admitted).
func admissionOf(turn TurnID, earlier, entry JournalEntry) Admission {
	a := Admission{Entry: entry, From: earlier.Turn}
	switch {
	case earlier.Status == journalUnset:
		a.Kind = AdmittedNow
	case earlier.Turn == turn:
		a.Kind = AdmittedByThisTurn
	case entry.Turn == turn:
		a.Kind = AdoptedFromAbandoned
	default:
		a.Kind = AdmittedByAnotherTurn
	}
	return a
}
