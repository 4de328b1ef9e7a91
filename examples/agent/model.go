package main

import (
	"encoding/json"
	"fmt"
	"strings"
)

// message is one user message, with the id the user's client gave it: a
// client that sends a message again (it never saw the answer) sends the
// same id.
type message struct {
	ID   string
	Text string
}

// step is what the model does next: call tools, or answer.
type step struct {
	Calls  []toolCall
	Answer string
}

// The messages of the story.
const (
	askSearch = "Find me a flight from Lisbon to Oslo on 12 March."
	askBook   = "Book TP123 and pay for it."
	askEmail  = "Email me the itinerary at ana@example.com."
)

// scriptedModel stands in for an LLM: deterministic, no network. Given a
// user message and no tool results it returns the tool calls its script
// names for the message; given the results it answers from them, and never
// calls a tool again in the same turn — in particular never retries a call
// whose outcome is unknown.
type scriptedModel struct{}

// script maps a user message to the tool calls the model makes for it.
var script = map[string][]toolCall{
	askSearch: {{ID: "c1", Name: toolSearch, Args: json.RawMessage(`{"from":"LIS","to":"OSL","date":"2026-03-12"}`)}},
	askBook: {
		{ID: "c1", Name: toolBook, Args: json.RawMessage(`{"flight":"TP123","date":"2026-03-12"}`)},
		{ID: "c2", Name: toolPay, Args: json.RawMessage(`{"flight":"TP123","cents":24000}`)},
	},
	askEmail: {{ID: "c1", Name: toolEmail, Args: json.RawMessage(`{"to":"ana@example.com","subject":"Your flight TP123"}`)}},
}

// Next returns the model's next step for msg, given the results of the
// tool calls it made for msg so far (nil: none yet).
func (scriptedModel) Next(msg message, results []toolResult) step {
	if results == nil {
		if calls, ok := script[msg.Text]; ok {
			return step{Calls: calls}
		}
		return step{Answer: "Sorry, I can only search, book, pay and email itineraries."}
	}
	var b strings.Builder
	for i, r := range results {
		if i > 0 {
			b.WriteString(" ")
		}
		b.WriteString(sentence(r))
	}
	return step{Answer: b.String()}
}

// sentence is the model's sentence about one tool result.
func sentence(r toolResult) string {
	var args struct {
		Flight string `json:"flight"`
		Cents  int    `json:"cents"`
	}
	_ = json.Unmarshal(r.Call.Args, &args)
	earlier := ""
	if r.Repeated {
		earlier = fmt.Sprintf(" by your earlier message at %s; I did not do it again", r.Since.Format("15:04:05"))
	}
	switch {
	case r.Status == statusUnknown:
		return "I asked the mail service to send your itinerary, but it did not confirm. The outcome is unknown, so I will not send it again (you might get it twice): we are verifying, and I will tell you."
	case r.Call.Name == toolSearch && r.Status == statusDone:
		return "I " + r.Text + ". Shall I book one?"
	case r.Call.Name == toolBook && r.Status == statusDone:
		if r.Repeated {
			return fmt.Sprintf("%s is already booked%s.", args.Flight, earlier)
		}
		return fmt.Sprintf("%s is booked.", args.Flight)
	case r.Call.Name == toolPay && r.Status == statusAwaiting:
		if r.Repeated {
			return fmt.Sprintf("Its payment of €%d.%02d, proposed at %s, still waits for your approval: nothing was charged.", args.Cents/100, args.Cents%100, r.Since.Format("15:04:05"))
		}
		return fmt.Sprintf("The payment of €%d.%02d waits for your approval.", args.Cents/100, args.Cents%100)
	case r.Call.Name == toolPay && r.Status == statusDone:
		return fmt.Sprintf("It is paid%s.", earlier)
	case r.Call.Name == toolEmail && r.Status == statusDone:
		return "I emailed you the itinerary."
	}
	return fmt.Sprintf("%s: %s.", r.Call.Name, r.Text)
}
