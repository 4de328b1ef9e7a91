package turnframe

import "fmt"

// The ceilings of Limits: the most any configuration may allow, and what
// every store refuses above in Write.Validate whoever wrote the Write, so a
// caller of Store.Apply cannot store a 1 GiB payload either. MaxTextLen
// (64 KiB) is the ceiling of Limits.Text.
const (
	MaxPayloadLen      = 16 << 20 // bytes of a command's or an outbox message's payload
	MaxEventDataLen    = 16 << 20 // bytes of an event's data
	MaxPlanCommands    = 1000     // commands one Plan (one Write) admits
	MaxOutcomeEvents   = 1000     // events one command's outcome (one Write) appends
	MaxOutcomeMessages = 1000     // outbox messages one command's outcome (one Write) enqueues
	MaxPlanCases       = 1000     // cases one Plan's replay record names as loaded
	MaxPlanQuestions   = 1000     // questions one Plan's understanding holds
	MaxExpectedCases   = 1000     // cases one Write expects at a revision (Write.Expect; the Runtime sets one)
)

// Limits bounds what an application hands a Runtime: each field is the most
// one input may hold. A zero field means its default (DefaultLimits); a
// field may be lowered, or raised up to its ceiling. An input over a limit
// is ErrInvalid (an *InvalidError naming the field, the size and the
// limit) and nothing of it is written. Configure a Runtime with WithLimits.
type Limits struct {
	// Text bounds, in bytes, a turn's text (Receive, ReceiveMessage) and
	// the answer Deliver records. Default 64 KiB; ceiling MaxTextLen,
	// also 64 KiB: a turn is a message and an answer, and a document
	// belongs in a payload or the application's own rows. Lowering it
	// refuses no redelivery of a message received before under a higher
	// one: ReceiveMessage judges a message id first.
	Text int
	// Payload bounds, in bytes, a command's payload (Plan) and an outbox
	// message's (a handler's Commit). Default 1 MiB; ceiling
	// MaxPayloadLen, 16 MiB.
	Payload int
	// EventData bounds, in bytes, an event's data (a handler's Commit).
	// Default 1 MiB; ceiling MaxEventDataLen, 16 MiB.
	EventData int
	// Commands bounds the commands of one Plan. Default 100: a turn is one
	// message of one user, and a plan of more than a hundred commands is
	// a runaway planner, not a request; one Plan is one transaction, and
	// Execute runs its commands one by one. Ceiling MaxPlanCommands, 1000.
	Commands int
	// Events bounds the events one command's Commit appends. Default 100:
	// a command changes one case, and its events are written in the one
	// transaction of its settlement. Ceiling MaxOutcomeEvents, 1000.
	Events int
	// Messages bounds the outbox messages one command's Commit enqueues.
	// Default 100, for the same reason. Ceiling MaxOutcomeMessages, 1000.
	Messages int
	// Cases bounds the cases one Plan names as loaded (Plan.LoadedCases),
	// and Questions the questions of its understanding: both go into the
	// turn's replay record, in the Plan's one transaction, and each
	// question's answer task names every loaded case. Default 100 each;
	// ceilings MaxPlanCases and MaxPlanQuestions, 1000.
	Cases     int
	Questions int
}

// DefaultLimits returns the limits a Runtime keeps without WithLimits:
// 64 KiB of text, 1 MiB payloads and event data, 100 commands, 100 loaded
// cases and 100 questions per plan, 100 events and 100 outbox messages per
// command outcome.
func DefaultLimits() Limits {
	return Limits{Text: 64 << 10, Payload: 1 << 20, EventData: 1 << 20, Commands: 100, Events: 100, Messages: 100,
		Cases: 100, Questions: 100}
}

// limitField is one field of Limits: its name, its value, its default and
// its ceiling, with the name of the ceiling.
type limitField struct {
	name        string
	value       *int
	def, max    int
	ceilingName string
}

func (l *Limits) fields(d Limits) []limitField {
	return []limitField{
		{"Text", &l.Text, d.Text, MaxTextLen, "MaxTextLen"},
		{"Payload", &l.Payload, d.Payload, MaxPayloadLen, "MaxPayloadLen"},
		{"EventData", &l.EventData, d.EventData, MaxEventDataLen, "MaxEventDataLen"},
		{"Commands", &l.Commands, d.Commands, MaxPlanCommands, "MaxPlanCommands"},
		{"Events", &l.Events, d.Events, MaxOutcomeEvents, "MaxOutcomeEvents"},
		{"Messages", &l.Messages, d.Messages, MaxOutcomeMessages, "MaxOutcomeMessages"},
		{"Cases", &l.Cases, d.Cases, MaxPlanCases, "MaxPlanCases"},
		{"Questions", &l.Questions, d.Questions, MaxPlanQuestions, "MaxPlanQuestions"},
	}
}

// resolved returns l with every zero field at its default. It panics when a
// field is negative or over its ceiling: a configuration, not an input.
func (l Limits) resolved() Limits {
	for _, f := range l.fields(DefaultLimits()) {
		switch {
		case *f.value < 0:
			panic(fmt.Sprintf("turnframe: Limits.%s is %d; a limit is 0 (the default) or positive", f.name, *f.value))
		case *f.value > f.max:
			panic(fmt.Sprintf("turnframe: Limits.%s is %d, over its ceiling %s (%d)", f.name, *f.value, f.ceilingName, f.max))
		case *f.value == 0:
			*f.value = f.def
		}
	}
	return l
}

// CheckText returns ErrInvalid naming "text" unless text is valid UTF-8 of
// at most l.Text bytes (its default when zero) without a NUL byte: the check of a turn's
// text. Empty text is allowed: a voice turn may have none. Like WithLimits,
// it panics when a field of l is negative or over its ceiling.
func (l Limits) CheckText(text string) error {
	return l.resolved().checkText("text", text)
}

// checkText checks a text of a turn or an answer against l.Text.
func (l Limits) checkText(field, text string) error {
	if err := checkSize(field, len(text), l.Text, "Limits.Text", "bytes"); err != nil {
		return err
	}
	return checkString(field, text, 0, MaxTextLen)
}

// checkPlan checks the size of a plan against l: its loaded cases and
// questions, its commands' number, then each payload.
func (l Limits) checkPlan(p Plan) error {
	if err := checkSize("loaded_cases", len(p.LoadedCases), l.Cases, "Limits.Cases", "cases"); err != nil {
		return err
	}
	if p.Understanding != nil {
		if err := checkSize("understanding.questions", len(p.Understanding.Questions), l.Questions, "Limits.Questions", "questions"); err != nil {
			return err
		}
	}
	cmds := p.Commands
	if err := checkSize("commands", len(cmds), l.Commands, "Limits.Commands", "commands"); err != nil {
		return err
	}
	for i, cmd := range cmds {
		if err := checkSize(fmt.Sprintf("commands[%d].payload", i), len(cmd.Payload), l.Payload, "Limits.Payload", "bytes"); err != nil {
			return err
		}
	}
	return nil
}

// checkCommit checks the size of a Commit's events and outbox messages
// against l: their numbers, each event's data, each message's payload.
func (l Limits) checkCommit(events []Event, msgs []OutboxMessage) error {
	if err := checkSize("events", len(events), l.Events, "Limits.Events", "events"); err != nil {
		return err
	}
	if err := checkSize("outbox", len(msgs), l.Messages, "Limits.Messages", "outbox messages"); err != nil {
		return err
	}
	for i, ev := range events {
		if err := checkSize(fmt.Sprintf("events[%d].data", i), len(ev.Data), l.EventData, "Limits.EventData", "bytes"); err != nil {
			return err
		}
	}
	for i, m := range msgs {
		if err := checkSize(fmt.Sprintf("outbox[%d].payload", i), len(m.Payload), l.Payload, "Limits.Payload", "bytes"); err != nil {
			return err
		}
	}
	return nil
}

// checkSize returns ErrInvalid naming field, the size n in unit, the limit
// max and its name, when n is over max.
func checkSize(field string, n, max int, name, unit string) error {
	if n > max {
		return invalid(field, "%d %s, more than the limit of %d (%s)", n, unit, max, name)
	}
	return nil
}

// checkCeiling is checkSize for the ceilings every store keeps.
func checkCeiling(field string, n, max int, name, unit string) error {
	if n > max {
		return invalid(field, "%d %s, more than the ceiling of %d (%s)", n, unit, max, name)
	}
	return nil
}

// Limits returns the limits rt checks its input against (WithLimits), every
// field resolved: no zero field.
func (rt *Runtime) Limits() Limits { return rt.cfg.limits }
