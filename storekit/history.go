package storekit

import (
	"strconv"
	"time"

	"github.com/turnframe/turnframe"
)

// EntryHistory returns the record of an entry's move from before to after
// (before is the zero entry when it was admitted), made by actor at at.
// Stores call it for every Write that changes an entry's status or attempt.
func EntryHistory(before, after turnframe.JournalEntry, actor turnframe.Actor, note string, at time.Time) turnframe.HistoryRecord {
	r := turnframe.HistoryRecord{
		Subject: turnframe.JournalSubject(after.Account, after.Key),
		To:      after.Status.String(),
		Actor:   orApp(actor), Code: after.Code, RemoteRef: after.RemoteRef, Note: clip(note, turnframe.MaxNoteLen), At: at,
	}
	if before.Status != turnframe.JournalStatus(0) {
		r.From = before.Status.String()
	}
	// An attempt moved it: a take or a renewal, the holder settling, or a
	// local attempt settling it straight from Pending.
	byAttempt := after.Status == turnframe.JournalExecuting || before.Status == turnframe.JournalExecuting ||
		before.Status == turnframe.JournalPending
	if !after.Attempt.IsZero() && byAttempt {
		r.Attempt = after.Attempt.String()
	}
	if before.Status == turnframe.JournalExecuting && after.Status == turnframe.JournalPending {
		// The holder's put-back before its first call: the entry keeps
		// the code it had before the take (an approval's, a resend's),
		// which is no reason this move gives — recorded, it would read as
		// the app approving or resending the command itself.
		r.Code = ""
	}
	return r
}

// EntryMoved reports whether a Write's settlement changed what the audit
// trail records: the status or the attempt. A holder renewing its lease
// moves nothing and is not recorded.
func EntryMoved(before, after turnframe.JournalEntry) bool {
	return before.Status != after.Status || before.Attempt != after.Attempt
}

// RowHistory returns the record of an outbox row's move from before to
// after (before is the zero row when it was enqueued), made by actor at at.
// Stores call it for every change of a row's status. An expiry without a
// note gets one saying why the outcome is unknown.
func RowHistory(before, after turnframe.OutboxRecord, actor turnframe.Actor, note string, at time.Time) turnframe.HistoryRecord {
	r := turnframe.HistoryRecord{
		Subject: turnframe.OutboxSubject(after.Account, after.ID),
		To:      after.Status.String(),
		Actor:   orApp(actor), Code: after.LastCode, RemoteRef: after.RemoteRef, Note: clip(note, turnframe.MaxNoteLen), At: at,
	}
	if before.Status != turnframe.OutboxStatus(0) {
		r.From = before.Status.String()
	}
	if r.Note == "" && before.Status == turnframe.OutboxDispatching && after.Status == turnframe.OutboxOutcomeUnknown && after.LastCode == turnframe.CodeLeaseEnded {
		r.Note = "the claim's lease ended before its worker settled it; its send may have started"
	}
	if after.Attempts > 0 {
		r.Attempt = strconv.Itoa(after.Attempts)
	}
	return r
}

// PhaseHistory returns the record of a turn's move from phase from to phase
// to (from is PhaseUnset when the turn began), made by actor at at; code is
// the abandon code, if any.
func PhaseHistory(account turnframe.AccountID, turn turnframe.TurnID, from, to turnframe.TurnPhase, actor turnframe.Actor, code string, at time.Time) turnframe.HistoryRecord {
	r := turnframe.HistoryRecord{Subject: turnframe.TurnSubject(account, turn), To: to.String(), Actor: orApp(actor), Code: code, At: at}
	if from != turnframe.PhaseUnset {
		r.From = from.String()
	}
	return r
}
