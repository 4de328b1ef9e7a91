package turnframe

// ReplayRecord is what a turn keeps for recovery to rebuild its answer from:
// the understanding it planned with and the cases it loaded. Each Write that
// carries one replaces the turn's previous record whole.
type ReplayRecord struct {
	Understanding *Understanding // nil until the turn was interpreted
	LoadedCases   []CaseKey      // the cases the turn read to plan
	Response      string         // the answer delivered, once delivered
	AbandonCode   string         // why the turn was abandoned, if it was
}

// overCeilings reports whether r holds more loaded cases or questions than
// a Write may carry (MaxPlanCases, MaxPlanQuestions): only a record a
// release before those ceilings kept can.
func (r ReplayRecord) overCeilings() bool {
	return len(r.LoadedCases) > MaxPlanCases || (r.Understanding != nil && len(r.Understanding.Questions) > MaxPlanQuestions)
}

// withinCeilings returns r with its loaded cases and questions cut to the
// ceilings, the first of each kept.
func (r ReplayRecord) withinCeilings() ReplayRecord {
	if len(r.LoadedCases) > MaxPlanCases {
		r.LoadedCases = r.LoadedCases[:MaxPlanCases:MaxPlanCases]
	}
	if r.Understanding != nil && len(r.Understanding.Questions) > MaxPlanQuestions {
		u := *r.Understanding
		u.Questions = u.Questions[:MaxPlanQuestions:MaxPlanQuestions]
		r.Understanding = &u
	}
	return r
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

// UnmarshalText implements encoding.TextUnmarshaler; an unknown name is
// ErrInvalid.
func (b *AnswerBasis) UnmarshalText(text []byte) error {
	for i, name := range basisNames {
		if name == string(text) {
			*b = AnswerBasis(i)
			return nil
		}
	}
	return invalid("answer basis", "%q is not one", text)
}
