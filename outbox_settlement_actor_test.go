package turnframe_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// A claim is settled by its worker, or by the policy for a send the
// Dispatcher withheld; no other actor settles one, and its note is held to
// what a history record keeps.
func TestAnOutboxSettlementNamesOnlyThePolicyOrNoActor(t *testing.T) {
	gen := turnframe.NewIDGenerator()
	claim := turnframe.Claim{OutboxEntry: turnframe.OutboxEntry{ID: gen.OutboxID(dispNow), Attempts: 2}, Worker: "w1"}
	settle := func(actor turnframe.Actor, note string) turnframe.OutboxSettlement {
		return turnframe.OutboxSettlement{Claim: claim, To: turnframe.OutboxOutcomeUnknown, Code: turnframe.CodeKeyForgotten,
			Actor: actor, Note: note, Now: dispNow}
	}
	for _, tt := range []struct {
		name  string
		s     turnframe.OutboxSettlement
		valid bool
		by    turnframe.Actor
	}{
		{"the worker", settle("", ""), true, turnframe.WorkerActor("w1")},
		{"the policy", settle(turnframe.ActorPolicy, "withheld"), true, turnframe.ActorPolicy},
		{"an operator", settle(turnframe.ActorOperator, ""), false, ""},
		{"another worker", settle(turnframe.WorkerActor("w2"), ""), false, ""},
		{"a note too long", settle(turnframe.ActorPolicy, strings.Repeat("n", turnframe.MaxNoteLen+1)), false, ""},
		{"a note with a NUL", settle(turnframe.ActorPolicy, "with\x00held"), false, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			err := tt.s.Validate()
			if !tt.valid {
				is.True(errors.Is(err, turnframe.ErrInvalid)) // refused before any store writes it
				return
			}
			is.NoErr(err)
			is.Equal(tt.s.SettledBy(), tt.by) // the actor the audit trail records
		})
	}
}
