package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

// The tools the model may call, each a turnframe command name.
const (
	toolSearch = "search_flights" // local: the results are the app's own row
	toolBook   = "book_flight"    // an outbox message to the airline
	toolPay    = "pay"            // needs approval; an outbox message to payments
	toolEmail  = "send_email"     // the handler calls the mail remote itself
)

// toolCall is one tool call the model made.
type toolCall struct {
	ID   string          // the model's call id, unique within its message
	Name string          // the tool
	Args json.RawMessage // its arguments, as the model wrote them
}

// commandKey is the idempotency key of call in the turn the user's client
// named messageID: the same message sent again yields the same keys, so
// the tool runs once. The message id enters it as keyPart makes it.
func commandKey(messageID string, call toolCall) turnframe.IdempotencyKey {
	return turnframe.IdempotencyKey(keyPart(messageID) + "/" + call.ID)
}

// plainID is a message id keyPart keeps as it is: short, and of characters
// no key or case refuses and no slash.
var plainID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$`)

// keyPart is a message id as the example's keys and cases hold it. A
// platform's id is any MessageID: it may begin or end with a space, hold
// the '~' turnframe reserves in keys or the '/' the example's keys are cut
// at, and run to 255 bytes, longer than a key or a case may be with
// anything added. Such an id becomes '#' and a digest of it: '#' is never
// in a plain id, so no two message ids share a part. (Embedded as it was,
// a refused key failed the Plan of a turn received already, and neither
// the first delivery nor recovery could ever plan it.)
func keyPart(messageID string) string {
	if plainID.MatchString(messageID) {
		return messageID
	}
	sum := sha256.Sum256([]byte(messageID))
	return "#" + hex.EncodeToString(sum[:16])
}

// callOf rebuilds the tool call a journal entry was admitted for.
func callOf(e turnframe.JournalEntry) toolCall {
	_, id, _ := strings.Cut(string(e.Key), "/")
	return toolCall{ID: id, Name: e.Name, Args: e.Payload}
}

// command is the turnframe command of call: payments need approval.
func command(messageID string, call toolCall) turnframe.Command {
	var args struct {
		Flight string `json:"flight"`
		To     string `json:"to"`
	}
	_ = json.Unmarshal(call.Args, &args)
	c := turnframe.CaseKey("flight/" + args.Flight)
	switch call.Name {
	case toolSearch:
		c = turnframe.CaseKey("search/" + keyPart(messageID))
	case toolEmail:
		c = turnframe.CaseKey("mailbox/" + args.To)
	}
	return turnframe.Command{Key: commandKey(messageID, call), Case: c, Name: call.Name,
		Payload: call.Args, NeedsApproval: call.Name == toolPay}
}

// flight is one result of a search.
type flight struct {
	Flight  string `json:"flight"`
	Departs string `json:"departs"`
	Cents   int    `json:"cents"`
}

// inventory is the flights the search finds, whatever it is asked.
var inventory = []flight{{"TP123", "08:10", 24000}, {"SK456", "13:45", 31000}}

// tools returns the Mux of the example's tools, sending mail through r.
func tools(r *remotes) *turnframe.Mux {
	m := new(turnframe.Mux)
	m.RegisterFunc(toolSearch, searchFlights)
	m.RegisterFunc(toolBook, bookFlight)
	m.RegisterFunc(toolPay, pay)
	m.RegisterFunc(toolEmail, func(ctx context.Context, call turnframe.Call) turnframe.Outcome {
		return sendEmail(ctx, r, call)
	})
	return m
}

// searchFlights commits the search's results as a row of the app's own
// table, in the transaction that commits the command.
func searchFlights(_ context.Context, call turnframe.Call) turnframe.Outcome {
	found, _ := json.Marshal(inventory)
	return turnframe.Commit([]turnframe.Event{{Case: call.Command.Case, Type: "flights.found", Data: found}}).
		With(func(ctx context.Context, tx turnframe.Tx) error {
			sqlTx, ok := sqlitestore.SQLTx(tx)
			if !ok {
				return fmt.Errorf("search_flights needs the SQLite store")
			}
			_, err := sqlTx.ExecContext(ctx, `INSERT INTO searches (account, command_key, flights) VALUES (?, ?, ?)`,
				string(call.Account), string(call.Command.Key), string(found))
			return err
		})
}

// bookFlight commits the booking and an outbox message to the airline.
func bookFlight(_ context.Context, call turnframe.Call) turnframe.Outcome {
	return turnframe.Commit([]turnframe.Event{{Case: call.Command.Case, Type: "flight.booked", Data: call.Command.Payload}},
		turnframe.OutboxMessage{Destination: remoteAirline, Payload: call.Command.Payload})
}

// pay commits the payment and an outbox message to payments; it runs only
// once approved.
func pay(_ context.Context, call turnframe.Call) turnframe.Outcome {
	return turnframe.Commit([]turnframe.Event{{Case: call.Command.Case, Type: "flight.paid", Data: call.Command.Payload}},
		turnframe.OutboxMessage{Destination: remotePayments, Payload: call.Command.Payload})
}

// sendEmail calls the mail remote itself, under the command's deadline:
// no answer in time is an unknown outcome, for recovery to look up.
func sendEmail(ctx context.Context, r *remotes, call turnframe.Call) turnframe.Outcome {
	ref, err := r.post(ctx, remoteMail, mailKey(call.Account, call.Command.Key), call.Command.Payload)
	if err != nil {
		return turnframe.Unknown("")
	}
	return turnframe.Commit([]turnframe.Event{{Case: call.Command.Case, Type: "email.sent", Data: []byte(ref)}})
}

// mailKey is the Idempotency-Key send_email gives the mail remote, and the
// key its Verifier looks an unknown email up by: the command's key
// qualified by its account in turnframe's injective encoding
// (OutboxEntry.RemoteKey; DESIGN.md §3, Remote keys), so two tenants' keys
// never meet. Joined by a slash, tenant "ana/m3"'s command "c1" and tenant
// "ana"'s command "m3/c1" would be one key, and one tenant's unknown email
// would be verified as sent from the other's.
func mailKey(account turnframe.AccountID, key turnframe.IdempotencyKey) string {
	return turnframe.OutboxEntry{Account: account, Key: key}.RemoteKey()
}
