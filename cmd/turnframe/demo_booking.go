package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/turnframe/turnframe"
)

// demoAccount is the tenant the demo's turns belong to.
const demoAccount turnframe.AccountID = "trattoria"

// effect is one intended effect of the demo: one user turn, the one command
// it plans, and the one outbox row its commit enqueues to one remote.
type effect struct {
	n       int    // the turn's number, from 1
	text    string // what the user says
	command string // the command's name
	dest    string // the outbox destination: the remote it goes to
	item    string // what is charged, ordered or booked
	cents   int    // how much
	key     turnframe.IdempotencyKey
	trouble misbehaviour // what happens to its first send

	conv turnframe.ConversationID // set once received
	turn turnframe.TurnID         // set once received
	row  turnframe.OutboxID       // set once committed
}

// inbound is e's message as the chat platform delivers it in conv, under
// the platform's id of the message, every time it delivers it.
func (e *effect) inbound(conv turnframe.ConversationID) turnframe.Inbound {
	return turnframe.Inbound{Account: demoAccount, Conversation: conv,
		MessageID: turnframe.MessageID(fmt.Sprintf("chat-msg-%d", e.n)), Text: e.text}
}

// bookingScript returns the conversation the demo plays, one effect a turn:
// three charges to the payments remote, a cake ordered from the bakery and
// a space booked at the parking garage.
func bookingScript() []*effect {
	effects := []*effect{
		{n: 1, text: "A table for two on Friday at 8pm, please.", command: "book_table", dest: destPayments, item: "deposit", cents: 2000},
		{n: 2, text: "Add the tasting menu for both of us.", command: "add_menu", dest: destPayments, item: "tasting menu", cents: 9000},
		{n: 3, text: "And a bottle of the Rioja.", command: "add_wine", dest: destPayments, item: "Rioja", cents: 4500},
		{n: 4, text: "It is her birthday: order a cake from the bakery.", command: "order_cake", dest: destBakery, item: "cake", cents: 2500},
		{n: 5, text: "Can you reserve a parking space too?", command: "book_parking", dest: destParking, item: "parking", cents: 1000},
	}
	for _, e := range effects {
		e.key = turnframe.IdempotencyKey("booking-friday/" + strings.ReplaceAll(e.item, " ", "-"))
	}
	return effects
}

// remoteKey is the Idempotency-Key the HTTPSender sends for e's row: its key
// qualified by the account.
func (e *effect) remoteKey() string {
	return turnframe.OutboxEntry{Account: demoAccount, Key: e.key}.RemoteKey()
}

func (e *effect) label() string { return fmt.Sprintf("%s %s", e.item, euros(e.cents)) }

func euros(cents int) string { return fmt.Sprintf("€%d.%02d", cents/100, cents%100) }

// item is the payload of a command, of its event and of its outbox row.
type item struct {
	Booking string `json:"booking"`
	Item    string `json:"item"`
	Cents   int    `json:"amount_cents"`
}

// plan is what the application made of e's text: one command under e's key,
// and the question to answer, the whole text.
func (e *effect) plan(booking turnframe.CaseKey) turnframe.Plan {
	payload, _ := json.Marshal(item{Booking: string(booking), Item: e.item, Cents: e.cents})
	words := len(strings.Fields(e.text))
	return turnframe.Plan{
		Understanding: &turnframe.Understanding{Questions: []turnframe.UnderstoodQuestion{{
			Unit:  1,
			Words: turnframe.WordRange{First: 0, Last: words - 1, Start: 0, End: len(e.text)},
			Basis: turnframe.BasisCommittedStateAfterTurn,
		}}},
		LoadedCases: []turnframe.CaseKey{booking},
		Commands: []turnframe.Command{{
			Key: e.key, Case: booking, Name: e.command, Payload: payload,
		}},
	}
}

// booking is the demo's domain: a Handler that adds an item to the booking
// (an event) and asks its remote for it (an outbox message to the command's
// destination), committed together. crash, when set, is called first and
// may stop the call the way a dying process would.
type booking struct {
	mu    sync.Mutex
	calls map[turnframe.IdempotencyKey]int
	dests map[string]string // command name → destination
	crash func(ctx context.Context, call turnframe.Call) bool
}

func newBooking(effects []*effect) *booking {
	b := &booking{calls: make(map[turnframe.IdempotencyKey]int), dests: make(map[string]string)}
	for _, e := range effects {
		b.dests[e.command] = e.dest
	}
	return b
}

// Handle implements turnframe.Handler.
func (b *booking) Handle(ctx context.Context, call turnframe.Call) turnframe.Outcome {
	b.mu.Lock()
	b.calls[call.Command.Key]++
	crash := b.crash
	b.mu.Unlock()
	if crash != nil && crash(ctx, call) {
		return turnframe.Reject("demo.process_died") // never read: Execute has returned
	}
	var it item
	if err := json.Unmarshal(call.Command.Payload, &it); err != nil {
		return turnframe.Reject("demo.bad_payload")
	}
	dest := b.dests[call.Command.Name]
	if dest == "" {
		return turnframe.Reject("demo.unknown_command")
	}
	return turnframe.Commit(
		[]turnframe.Event{{Case: call.Command.Case, Type: "booking.item_added", Data: call.Command.Payload}},
		turnframe.OutboxMessage{Destination: dest, Payload: call.Command.Payload},
	)
}

// answer is what the assistant says once events committed.
func answer(events []turnframe.StoredEvent) string {
	var parts []string
	for _, ev := range events {
		var it item
		if json.Unmarshal(ev.Data, &it) == nil {
			parts = append(parts, fmt.Sprintf("%s (%s) is on your booking", it.Item, euros(it.Cents)))
		}
	}
	if len(parts) == 0 {
		return "Nothing changed on your booking."
	}
	return "Done: " + strings.Join(parts, ", ") + "."
}

// answerAround is what the assistant says when some commands' outcomes are
// unknown (recovery answered around them): what committed, and that the
// rest is being verified, never that nothing changed.
func answerAround(events []turnframe.StoredEvent, unknown []turnframe.JournalEntry) string {
	names := make([]string, len(unknown))
	for i, e := range unknown {
		names[i] = e.Name
	}
	checking := "We are checking whether " + strings.Join(names, ", ") + " went through; we will not do it twice."
	if len(events) == 0 {
		return checking
	}
	return answer(events) + " " + checking
}
