package turnframe

import "fmt"

// ReplayRecord is what a turn keeps for recovery to rebuild its answer from:
// the understanding it planned with and the cases it loaded. Each Write that
// carries one replaces the turn's previous record whole.
type ReplayRecord struct {
	Understanding *Understanding // nil until the turn was interpreted
	LoadedCases   []CaseKey      // the cases the turn read to plan
	Response      string         // the answer delivered, once delivered
	AbandonCode   string         // why the turn was abandoned, if it was
}

// fitted returns r as a Write may carry it, and whether that changed
// anything. A record an earlier release kept may break a rule Write.Validate
// holds now: more loaded cases or questions than the ceilings, a case key
// those rules refuse (one with a NUL byte, say), a response or a code over
// its bound, a question whose answer basis is out of range. Deliver and
// Abandon write the record back whole, and refused it would leave its turn
// unable to end. So loaded cases and questions are cut to the ceilings,
// the first kept; a case key no rule keeps, and a question with no answer
// basis, are dropped; the response is made keepable text, and a code no
// store keeps is made keepable too.
func (r ReplayRecord) fitted() (ReplayRecord, bool) {
	if r.Validate() == nil {
		return r, false
	}
	var cases []CaseKey
	for _, c := range r.LoadedCases {
		if c.Validate() == nil && len(cases) < MaxPlanCases {
			cases = append(cases, c)
		}
	}
	r.LoadedCases = cases
	if r.Understanding != nil {
		var qs []UnderstoodQuestion
		for _, q := range r.Understanding.Questions {
			if q.Basis <= BasisGeneralDomainKnowledge && len(qs) < MaxPlanQuestions {
				qs = append(qs, q)
			}
		}
		r.Understanding = &Understanding{Questions: qs}
	}
	r.Response = keepable(r.Response, MaxTextLen)
	r.AbandonCode = keepable(r.AbandonCode, MaxNameLen)
	return r, true
}

// Understanding is the application's reading of the user's message, reduced
// to what recovery needs: the questions it must answer.
type Understanding struct {
	Questions []UnderstoodQuestion
}

// UnderstoodQuestion is one question the user asked, located in the turn's
// text by byte range.
type UnderstoodQuestion struct {
	Unit              int         // the application's number for it
	Words             WordRange   // where it is in the text
	Basis             AnswerBasis // what the answer must rest on
	ContinuesPrevious bool        // it continues the previous turn's question
}

// WordRange locates words in a turn's text: First and Last count words, Start
// and End are byte offsets (End exclusive) into the text.
type WordRange struct {
	First, Last int
	Start, End  int
}

// AnswerBasis is what an answer must rest on.
type AnswerBasis uint8

const (
	// BasisCurrentCommittedState: what the domain holds now.
	BasisCurrentCommittedState AnswerBasis = iota
	// BasisCommittedStateAfterTurn: what the domain will hold once this
	// turn's commands commit. After commit it is the same as the current
	// committed state.
	BasisCommittedStateAfterTurn
	// BasisGeneralDomainKnowledge: knowledge that no case holds; any source
	// may answer it.
	BasisGeneralDomainKnowledge
)

var basisNames = [...]string{"current_committed_state", "committed_state_after_turn", "general_domain_knowledge"}

// String returns the basis in snake case.
func (b AnswerBasis) String() string { return enumName(basisNames[:], int(b), "answer basis") }

// MarshalText implements encoding.TextMarshaler with the snake-case name.
func (b AnswerBasis) MarshalText() ([]byte, error) { return []byte(b.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler: it reads back every
// text MarshalText writes — a name, or "answer basis(N)" for a value out of
// range, which a release before Write.Validate checked the basis could
// store (Validate refuses it in a Write; Deliver and Abandon drop such a
// question, see ReplayRecord.fitted). Any other text is ErrInvalid.
func (b *AnswerBasis) UnmarshalText(text []byte) error {
	for i, name := range basisNames {
		if name == string(text) {
			*b = AnswerBasis(i)
			return nil
		}
	}
	var n uint8
	if _, err := fmt.Sscanf(string(text), "answer basis(%d)", &n); err == nil && AnswerBasis(n).String() == string(text) {
		*b = AnswerBasis(n)
		return nil
	}
	return invalid("answer basis", "%q is not one", text)
}
