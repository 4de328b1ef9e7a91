package turnframe_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/memstore"
)

const limAccount turnframe.AccountID = "acme"

// limitInput is one bounded input: how to hand a Runtime an input of size n,
// and what of it a store holds afterwards.
type limitInput struct {
	name  string                                     // the Limits field
	unit  string                                     // what the size counts
	field string                                     // the field a refusal names
	of    func(turnframe.Limits) int                 // the limit, from a Runtime's limits
	give  func(f *limitFixture, n int) error         // hands the Runtime an input of size n
	held  func(f *limitFixture) (written bool)       // whether anything of the input was written
	want  func(t *testing.T, f *limitFixture, n int) // what an accepted input of size n wrote
}

// limitFixture is a received turn of a Runtime over one store.
type limitFixture struct {
	t     *testing.T
	ctx   context.Context
	store turnframe.Store
	rt    *turnframe.Runtime
	turn  turnframe.TurnID
}

func newLimitFixture(t *testing.T, store turnframe.Store, l turnframe.Limits) *limitFixture {
	t.Helper()
	ctx := context.Background()
	rt := turnframe.New(store, turnframe.WithLimits(l))
	turn, err := rt.Receive(ctx, limAccount, rt.NewConversationID(), "book it")
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	return &limitFixture{t: t, ctx: ctx, store: store, rt: rt, turn: turn}
}

// plan plans n commands, each with a payload of size bytes, under keys of
// this turn alone (the fixtures of one test share a store).
func (f *limitFixture) plan(n, size int) error {
	cmds := make([]turnframe.Command, n)
	for i := range cmds {
		cmds[i] = turnframe.Command{Key: turnframe.IdempotencyKey(fmt.Sprintf("%s-%d", f.turn, i)), Case: f.caseKey(), Name: "book",
			Payload: make([]byte, size)}
	}
	_, err := f.rt.Plan(f.ctx, limAccount, f.turn, turnframe.Plan{Commands: cmds})
	return err
}

// commit plans one command and executes it with a handler that commits
// events and msgs.
func (f *limitFixture) commit(events []turnframe.Event, msgs []turnframe.OutboxMessage) error {
	if err := f.plan(1, 0); err != nil {
		f.t.Fatalf("plan: %v", err)
	}
	h := turnframe.HandlerFunc(func(context.Context, turnframe.Call) turnframe.Outcome {
		return turnframe.Commit(events, msgs...)
	})
	_, err := f.rt.Execute(f.ctx, limAccount, f.turn, h)
	return err
}

// caseKey is the case of the fixture's commands: its own.
func (f *limitFixture) caseKey() turnframe.CaseKey {
	return turnframe.CaseKey("booking/" + f.turn.String())
}

func (f *limitFixture) events() []turnframe.StoredEvent {
	evs, err := f.store.EventsSince(f.ctx, limAccount, f.caseKey(), 0, turnframe.MaxLimit)
	if err != nil {
		f.t.Fatalf("events: %v", err)
	}
	return evs
}

func (f *limitFixture) outbox() []turnframe.OutboxRecord {
	rows, err := f.store.ListOutbox(f.ctx, turnframe.OutboxFilter{Account: limAccount, Limit: turnframe.MaxLimit})
	if err != nil {
		f.t.Fatalf("list outbox: %v", err)
	}
	var own []turnframe.OutboxRecord
	for _, r := range rows {
		if r.Turn == f.turn {
			own = append(own, r)
		}
	}
	return own
}

func (f *limitFixture) entries() []turnframe.JournalEntry {
	entries, err := f.store.ForTurn(f.ctx, limAccount, f.turn)
	if err != nil {
		f.t.Fatalf("for turn: %v", err)
	}
	return entries
}

func (f *limitFixture) phase() turnframe.TurnPhase {
	m, err := f.store.TurnPhase(f.ctx, limAccount, f.turn)
	if err != nil {
		f.t.Fatalf("turn phase: %v", err)
	}
	return m.Phase
}

// planned reports whether the Plan wrote anything: an entry or the phase.
func planned(f *limitFixture) bool {
	return len(f.entries()) > 0 || f.phase() != turnframe.PhaseReceived
}

// committed reports whether the commit wrote anything: an event, an outbox
// row or the command's settlement.
func committed(f *limitFixture) bool {
	return len(f.events()) > 0 || len(f.outbox()) > 0 || f.entries()[0].Status != turnframe.JournalExecuting
}

func (f *limitFixture) eventsOf(n, size int) []turnframe.Event {
	evs := make([]turnframe.Event, n)
	for i := range evs {
		evs[i] = turnframe.Event{Case: f.caseKey(), Type: "booked", Data: make([]byte, size)}
	}
	return evs
}

func messages(n, size int) []turnframe.OutboxMessage {
	msgs := make([]turnframe.OutboxMessage, n)
	for i := range msgs {
		msgs[i] = turnframe.OutboxMessage{Destination: "payments", Payload: make([]byte, size)}
	}
	return msgs
}

// limitInputs are every input Limits bounds, through the Runtime call that
// takes it.
func limitInputs() []limitInput {
	return []limitInput{
		{
			name: "Commands", unit: "commands", field: "plan.commands",
			of:   func(l turnframe.Limits) int { return l.Commands },
			give: func(f *limitFixture, n int) error { return f.plan(n, 1) },
			held: planned,
			want: func(t *testing.T, f *limitFixture, n int) { is.New(t).Equal(len(f.entries()), n) }, // every command admitted
		},
		{
			name: "Payload", unit: "bytes", field: "plan.commands[0].payload",
			of:   func(l turnframe.Limits) int { return l.Payload },
			give: func(f *limitFixture, n int) error { return f.plan(1, n) },
			held: planned,
			want: func(t *testing.T, f *limitFixture, n int) { is.New(t).Equal(len(f.entries()[0].Payload), n) }, // the payload whole
		},
		{
			name: "Events", unit: "events", field: "outcome.events",
			of:   func(l turnframe.Limits) int { return l.Events },
			give: func(f *limitFixture, n int) error { return f.commit(f.eventsOf(n, 1), nil) },
			held: committed,
			want: func(t *testing.T, f *limitFixture, n int) { is.New(t).Equal(len(f.events()), n) }, // every event appended
		},
		{
			name: "EventData", unit: "bytes", field: "outcome.events[0].data",
			of:   func(l turnframe.Limits) int { return l.EventData },
			give: func(f *limitFixture, n int) error { return f.commit(f.eventsOf(1, n), nil) },
			held: committed,
			want: func(t *testing.T, f *limitFixture, n int) { is.New(t).Equal(len(f.events()[0].Data), n) }, // the data whole
		},
		{
			name: "Messages", unit: "outbox messages", field: "outcome.outbox",
			of:   func(l turnframe.Limits) int { return l.Messages },
			give: func(f *limitFixture, n int) error { return f.commit(nil, messages(n, 1)) },
			held: committed,
			want: func(t *testing.T, f *limitFixture, n int) { is.New(t).Equal(len(f.outbox()), n) }, // every message enqueued
		},
		{
			name: "Payload", unit: "bytes", field: "outcome.outbox[0].payload",
			of:   func(l turnframe.Limits) int { return l.Payload },
			give: func(f *limitFixture, n int) error { return f.commit(nil, messages(1, n)) },
			held: committed,
			want: func(t *testing.T, f *limitFixture, n int) { is.New(t).Equal(len(f.outbox()[0].Payload), n) }, // the payload whole
		},
		{
			name: "Text", unit: "bytes", field: "response",
			of: func(l turnframe.Limits) int { return l.Text },
			give: func(f *limitFixture, n int) error {
				if err := f.plan(0, 0); err != nil {
					f.t.Fatalf("plan: %v", err)
				}
				return f.rt.Deliver(f.ctx, limAccount, f.turn, strings.Repeat("r", n))
			},
			held: func(f *limitFixture) bool { return f.phase() == turnframe.PhaseDelivered },
			want: func(t *testing.T, f *limitFixture, n int) { is.New(t).Equal(f.phase(), turnframe.PhaseDelivered) }, // delivered
		},
	}
}

// TestLimits hands each bounded input at exactly its limit, which is
// accepted and written whole, and one byte or one item over it, which is
// ErrInvalid naming the field, the size and the limit, with nothing
// written: under the default limits, under smaller ones, and under limits
// raised to their ceiling (counts only: a ceiling of bytes is the store's,
// TestStoreCeilings).
func TestLimits(t *testing.T) {
	configs := []struct {
		name   string
		limits turnframe.Limits
	}{
		{"Defaults", turnframe.Limits{}},
		{"Smaller", turnframe.Limits{Text: 10, Payload: 10, EventData: 10, Commands: 3, Events: 3, Messages: 3}},
		{"CountsAtTheirCeiling", turnframe.Limits{Commands: turnframe.MaxPlanCommands, Events: turnframe.MaxOutcomeEvents, Messages: turnframe.MaxOutcomeMessages}},
	}
	for _, cfg := range configs {
		t.Run(cfg.name, func(t *testing.T) {
			for _, in := range limitInputs() {
				t.Run(in.field, func(t *testing.T) {
					eachStore(t, func(t *testing.T, store turnframe.Store) {
						limit := in.of(newLimitFixture(t, store, cfg.limits).rt.Limits())
						t.Run("AtTheLimitIsAccepted", func(t *testing.T) {
							is := is.New(t)
							f := newLimitFixture(t, store, cfg.limits)
							is.NoErr(in.give(f, limit)) // an input at the limit
							in.want(t, f, limit)
						})
						t.Run("OneOverIsInvalidAndWritesNothing", func(t *testing.T) {
							is := is.New(t)
							f := newLimitFixture(t, store, cfg.limits)
							err := in.give(f, limit+1)
							var ie *turnframe.InvalidError
							is.True(errors.Is(err, turnframe.ErrInvalid)) // one over the limit is ErrInvalid
							is.True(errors.As(err, &ie))                  // an *InvalidError
							is.Equal(ie.Field, in.field)                  // naming the field
							is.Equal(ie.Reason, fmt.Sprintf("%d %s, more than the limit of %d (Limits.%s)", limit+1, in.unit, limit, in.name))
							is.True(!in.held(f)) // nothing of it written
						})
					})
				})
			}
		})
	}
}

// TestLimitsErrorText pins the text of a refusal, as the docs quote it.
func TestLimitsErrorText(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		f := newLimitFixture(t, store, turnframe.Limits{})
		err := f.plan(3, 1<<20+1)
		is.Equal(err.Error(), "turnframe: invalid input: plan.commands[0].payload: 1048577 bytes, more than the limit of 1048576 (Limits.Payload)")
	})
}

func TestLimitsCheckText(t *testing.T) {
	cases := []struct {
		name   string
		limits turnframe.Limits
		text   string
		reason string // "" when the text is accepted
	}{
		{"EmptyIsAccepted", turnframe.Limits{}, "", ""},
		{"AtTheDefaultIsAccepted", turnframe.Limits{}, strings.Repeat("x", 64<<10), ""},
		{"OneOverTheDefault", turnframe.Limits{}, strings.Repeat("x", 64<<10+1), "65537 bytes, more than the limit of 65536 (Limits.Text)"},
		{"AtASmallerLimitIsAccepted", turnframe.Limits{Text: 5}, "hello", ""},
		{"OneOverASmallerLimit", turnframe.Limits{Text: 5}, "hello!", "6 bytes, more than the limit of 5 (Limits.Text)"},
		{"NotUTF8", turnframe.Limits{}, "bad\xff", "not valid UTF-8"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			err := tc.limits.CheckText(tc.text)
			if tc.reason == "" {
				is.NoErr(err) // within the limit
				return
			}
			var ie *turnframe.InvalidError
			is.True(errors.As(err, &ie))                  // an *InvalidError
			is.True(errors.Is(err, turnframe.ErrInvalid)) // ErrInvalid
			is.Equal(ie.Field, "text")                    // naming the text
			is.Equal(ie.Reason, tc.reason)                // the size and the limit
		})
	}
}

func TestWithLimits(t *testing.T) {
	t.Run("ZeroFieldsKeepTheirDefaults", func(t *testing.T) {
		is := is.New(t)
		rt := turnframe.New(memstoreForLimits(t), turnframe.WithLimits(turnframe.Limits{Commands: 7}))
		want := turnframe.DefaultLimits()
		want.Commands = 7
		is.Equal(rt.Limits(), want) // the one field set, the others at their defaults
	})
	t.Run("WithoutTheOptionTheDefaults", func(t *testing.T) {
		is := is.New(t)
		is.Equal(turnframe.New(memstoreForLimits(t)).Limits(), turnframe.DefaultLimits()) // the defaults
	})
	t.Run("EveryFieldMayBeRaisedToItsCeiling", func(t *testing.T) {
		is := is.New(t)
		top := turnframe.Limits{Text: turnframe.MaxTextLen, Payload: turnframe.MaxPayloadLen, EventData: turnframe.MaxEventDataLen,
			Commands: turnframe.MaxPlanCommands, Events: turnframe.MaxOutcomeEvents, Messages: turnframe.MaxOutcomeMessages,
			Cases: turnframe.MaxPlanCases, Questions: turnframe.MaxPlanQuestions}
		is.Equal(turnframe.New(memstoreForLimits(t), turnframe.WithLimits(top)).Limits(), top) // kept as given
	})
	panics := []struct {
		name   string
		limits turnframe.Limits
		says   string
	}{
		{"NegativeText", turnframe.Limits{Text: -1}, "Limits.Text is -1"},
		{"TextOverItsCeiling", turnframe.Limits{Text: turnframe.MaxTextLen + 1}, "over its ceiling MaxTextLen"},
		{"PayloadOverItsCeiling", turnframe.Limits{Payload: turnframe.MaxPayloadLen + 1}, "over its ceiling MaxPayloadLen"},
		{"EventDataOverItsCeiling", turnframe.Limits{EventData: turnframe.MaxEventDataLen + 1}, "over its ceiling MaxEventDataLen"},
		{"CommandsOverTheirCeiling", turnframe.Limits{Commands: turnframe.MaxPlanCommands + 1}, "over its ceiling MaxPlanCommands"},
		{"EventsOverTheirCeiling", turnframe.Limits{Events: turnframe.MaxOutcomeEvents + 1}, "over its ceiling MaxOutcomeEvents"},
		{"NegativeMessages", turnframe.Limits{Messages: -5}, "Limits.Messages is -5"},
		{"MessagesOverTheirCeiling", turnframe.Limits{Messages: turnframe.MaxOutcomeMessages + 1}, "over its ceiling MaxOutcomeMessages"},
		{"CasesOverTheirCeiling", turnframe.Limits{Cases: turnframe.MaxPlanCases + 1}, "over its ceiling MaxPlanCases"},
		{"QuestionsOverTheirCeiling", turnframe.Limits{Questions: turnframe.MaxPlanQuestions + 1}, "over its ceiling MaxPlanQuestions"},
	}
	for _, tc := range panics {
		t.Run(tc.name+"Panics", func(t *testing.T) {
			is := is.New(t)
			var got any
			func() {
				defer func() { got = recover() }()
				turnframe.WithLimits(tc.limits)
			}()
			msg, _ := got.(string)
			is.True(strings.Contains(msg, tc.says)) // the panic says which limit and why
		})
	}
}

// TestStoreCeilings writes straight to each store one byte or one item
// over a ceiling: Write.Validate refuses it whatever the Runtime's limits.
// (The bad-input table of storetest covers the same rows per store;
// this one pins the text.)
func TestStoreCeilings(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		f := newLimitFixture(t, store, turnframe.Limits{})
		w := turnframe.Write{Account: limAccount, Turn: f.turn, Now: turnframe.MinTime.AddDate(60, 0, 0), Phase: turnframe.PhasePlanned,
			Admit: []turnframe.Command{{Key: "k", Case: "booking/1", Name: "book", Payload: make([]byte, turnframe.MaxPayloadLen+1)}}}
		_, err := store.Apply(f.ctx, w)
		is.Equal(err.Error(), "turnframe: invalid input: write.admit[0].payload: 16777217 bytes, more than the ceiling of 16777216 (MaxPayloadLen)")
		is.True(!planned(f)) // nothing written
	})
}

func memstoreForLimits(t *testing.T) turnframe.Store {
	t.Helper()
	store := memstore.New()
	t.Cleanup(func() { store.Close() })
	return store
}
