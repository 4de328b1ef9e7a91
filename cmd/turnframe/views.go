package main

import (
	"github.com/turnframe/turnframe"
)

// outboxJSON is an outbox row as the --json listings print it.
type outboxJSON struct {
	ID          string `json:"id"`
	Status      string `json:"status"`
	Account     string `json:"account"`
	Turn        string `json:"turn"`
	Key         string `json:"key"`
	RemoteKey   string `json:"remote_key"`
	Destination string `json:"destination"`
	OrderKey    string `json:"order_key,omitempty"`
	Attempts    int    `json:"attempts"`
	// AttemptBase is the attempts made before the row's current attempt
	// budget began (0, or its attempts at its last requeue): the
	// dispatcher allows MaxAttempts attempts beyond it.
	AttemptBase   int      `json:"attempt_base"`
	DueAt         jsonTime `json:"due_at,omitzero"`
	ClaimedBy     string   `json:"claimed_by,omitempty"`
	ClaimedAt     jsonTime `json:"claimed_at,omitzero"`
	LeaseUntil    jsonTime `json:"lease_until,omitzero"` // dispatching: when the claim's lease ends
	LastCode      string   `json:"last_code,omitempty"`
	RemoteRef     string   `json:"remote_ref,omitempty"`
	TraceContext  string   `json:"trace_context,omitempty"` // as enqueued, e.g. a W3C traceparent
	CreatedAt     jsonTime `json:"created_at"`
	UpdatedAt     jsonTime `json:"updated_at"`
	FinishedAt    jsonTime `json:"finished_at,omitzero"`
	Payload       string   `json:"payload,omitempty"`
	PayloadBase64 string   `json:"payload_base64,omitempty"`
}

func outboxView(r turnframe.OutboxRecord) outboxJSON {
	text, b64 := payloadText(r.Payload)
	return outboxJSON{
		ID: r.ID.String(), Status: r.Status.String(), Account: string(r.Account), Turn: r.Turn.String(),
		Key: string(r.Key), RemoteKey: r.RemoteKey(), Destination: r.Destination, OrderKey: r.OrderKey,
		Attempts: r.Attempts, AttemptBase: r.AttemptBase, DueAt: at(r.DueAt), ClaimedBy: r.ClaimedBy,
		ClaimedAt: at(r.ClaimedAt), LeaseUntil: at(r.LeaseUntil), LastCode: r.LastCode, RemoteRef: r.RemoteRef,
		TraceContext: r.TraceContext, CreatedAt: at(r.CreatedAt), UpdatedAt: at(r.UpdatedAt), FinishedAt: at(r.FinishedAt),
		Payload: text, PayloadBase64: b64,
	}
}

// outboxColumns are the columns of an outbox table: BASE is the attempt
// base, DUE is shown for pending rows, LEASE UNTIL for dispatching ones.
var outboxColumns = []string{"ID", "STATUS", "ACCOUNT", "KEY", "DESTINATION", "ATTEMPTS", "BASE", "DUE", "LEASE UNTIL", "LAST CODE", "UPDATED"}

func outboxRow(r turnframe.OutboxRecord) []string {
	due := ""
	if r.Status == turnframe.OutboxPending {
		due = stamp(r.DueAt)
	}
	return []string{
		r.ID.String(), r.Status.String(), string(r.Account), string(r.Key), r.Destination,
		itoa(r.Attempts), itoa(r.AttemptBase), due, stamp(r.LeaseUntil), r.LastCode, stamp(r.UpdatedAt),
	}
}

// entryJSON is a journal entry as "show --json" prints it.
type entryJSON struct {
	Key           string   `json:"key"`
	Name          string   `json:"name"`
	Case          string   `json:"case"`
	Status        string   `json:"status"`
	Attempt       string   `json:"attempt,omitempty"`
	Attempts      int      `json:"attempts"`
	LeaseUntil    jsonTime `json:"lease_until,omitzero"` // executing: when the attempt's hold on the command ends
	EventIDs      []string `json:"event_ids,omitempty"`
	Code          string   `json:"code,omitempty"`
	RemoteRef     string   `json:"remote_ref,omitempty"`
	AdmittedAt    jsonTime `json:"admitted_at"`
	UpdatedAt     jsonTime `json:"updated_at"`
	Payload       string   `json:"payload,omitempty"`
	PayloadBase64 string   `json:"payload_base64,omitempty"`
	NeedsApproval bool     `json:"needs_approval,omitempty"` // admitted to await approval
}

func entryView(e turnframe.JournalEntry) entryJSON {
	text, b64 := payloadText(e.Payload)
	v := entryJSON{
		Key: string(e.Key), Name: e.Name, Case: string(e.Case), Status: e.Status.String(),
		Attempts: e.Attempts, LeaseUntil: at(e.LeaseUntil), Code: e.Code, RemoteRef: e.RemoteRef,
		AdmittedAt: at(e.AdmittedAt), UpdatedAt: at(e.UpdatedAt), Payload: text, PayloadBase64: b64,
		NeedsApproval: e.NeedsApproval,
	}
	if !e.Attempt.IsZero() {
		v.Attempt = e.Attempt.String()
	}
	for _, id := range e.EventIDs {
		v.EventIDs = append(v.EventIDs, id.String())
	}
	return v
}

// eventJSON is an event as "show --json" prints it.
type eventJSON struct {
	ID         string   `json:"id"`
	Case       string   `json:"case"`
	Revision   uint64   `json:"revision"`
	Type       string   `json:"type"`
	Key        string   `json:"key"`
	At         jsonTime `json:"at"`
	Data       string   `json:"data,omitempty"`
	DataBase64 string   `json:"data_base64,omitempty"`
}

func eventView(ev turnframe.StoredEvent) eventJSON {
	text, b64 := payloadText(ev.Data)
	return eventJSON{
		ID: ev.ID.String(), Case: string(ev.Case), Revision: uint64(ev.Revision), Type: ev.Type,
		Key: string(ev.Key), At: at(ev.At), Data: text, DataBase64: b64,
	}
}
