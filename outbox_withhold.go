package turnframe

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// withheldNote is what the audit trail says of a resend the Dispatcher
// withheld (sweep.withhold).
const withheldNote = "a resend the policy allowed while the remote remembered the key was claimed after it forgot it: withheld, the sender not called"

// rowKeyForgotten reports whether a send of a row of destination dest
// created at created, started at now and bound to answer within bound,
// could reach its remote when it does not remember the row's key: the
// destination is declared, and either as a remote that does not
// deduplicate at all, or now + bound is not before created + Deduplicates
// (Remote.reachesInWindow). The policy refuses a resend once the window
// closed (nextStep); the Dispatcher refuses to carry out one it allowed
// before that would arrive after it (Dispatcher.resendLapsed, bound its
// SendTimeout), or one it allowed under a declaration that a restart
// replaced with one of a remote that does not deduplicate.
func (s settings) rowKeyForgotten(dest string, created, now time.Time, bound time.Duration) bool {
	remote, declared := s.remoteFor(SubjectOutbox, dest)
	return declared && !remote.remembersOnArrival(created, now, bound)
}

// resendUnsettled reports whether a row's history, oldest first, ends in a
// resend by the policy under CodeResent whose earlier outcome is still in
// doubt: the last move out of OutcomeUnknown or NeedsIntervention was the
// policy's resend to a remote that deduplicates, and the row has not been
// Completed or Failed since. The sends that followed it and were answered
// retryable, or were put back unsent (CodeNotSent), or claimed again, leave
// the doubt where it was: none of them told whether the send that became
// unknown reached the remote. A person's resend, or the policy's after a
// lookup found the effect never arrived, settles the doubt.
func resendUnsettled(history []HistoryRecord) bool {
	unknown, needs := OutboxOutcomeUnknown.String(), OutboxNeedsIntervention.String()
	resent := false
	for _, h := range history {
		switch {
		case h.Evidence:
		case h.To == OutboxCompleted.String() || h.To == OutboxFailed.String():
			resent = false
		case h.To == OutboxPending.String() && (h.From == unknown || h.From == needs):
			resent = h.Actor == ActorPolicy && h.Code == CodeResent
		}
	}
	return resent
}

// resendLapsed reports whether claimed row c, about to be sent at now, is
// the policy's resend to a remote that deduplicates (resendUnsettled) and
// the remote may no longer remember its key when the send reaches it: now
// plus SendTimeout, the longest the send may take, is not before the end
// of the window, or the destination is declared now a remote that does
// not deduplicate (rowKeyForgotten). The policy allowed the resend within the
// window, but the row was claimed only after it, or too near its end — the
// dispatcher was down, the destination's limits, backoff or ordered
// delivery held it, or its retry came late — and sent now it could be the
// blind resend the policy refuses. The row's history is read only for a
// row sent before that is within SendTimeout of its window's end or past
// it, or whose destination is declared a remote that does not deduplicate
// (a retry there reads it, to tell a resend the policy made under an
// earlier declaration). A store that keeps no history cannot tell, and its rows are sent
// (every Store keeps it); an error reading the history is returned, and
// the row must not be sent.
func (d *Dispatcher) resendLapsed(ctx context.Context, c Claim, now time.Time) (bool, error) {
	if c.Attempts < 2 || !d.clock.rowKeyForgotten(c.Destination, c.CreatedAt, now, d.cfg.SendTimeout) {
		return false, nil
	}
	hs, ok := d.store.(HistoryStore)
	if !ok {
		return false, nil
	}
	subject := OutboxSubject(c.Account, c.ID)
	var history []HistoryRecord
	for after := int64(0); ; {
		page, err := hs.History(ctx, subject, after, MaxLimit)
		if err != nil {
			return false, fmt.Errorf("history of outbox row %v: %w", c.ID, err)
		}
		history = append(history, page...)
		if len(page) < MaxLimit {
			return resendUnsettled(history), nil
		}
		after = page[len(page)-1].Seq
	}
}

// withhold is the settlement of a claimed row the sweep does not send
// because its resend lapsed (Dispatcher.resendLapsed): OutcomeUnknown
// again, CodeKeyForgotten, recorded as the policy's with a note saying
// why, for the next Recover to escalate. A crash before it lands leaves
// the row Dispatching; its lease ends and an expiry makes it unknown all
// the same (CodeLeaseEnded), which the policy escalates past the window.
func (sw *sweep) withhold(idx int) queuedSettlement {
	c := sw.claims[idx]
	sw.d.obs.logf(sw.ctx, slog.LevelWarn, "turnframe: a resend to a remote that no longer remembers its key was withheld; its outcome stays unknown for the policy",
		rowAttrs(c)...)
	return queuedSettlement{
		idx: idx,
		settlement: OutboxSettlement{Claim: c, To: OutboxOutcomeUnknown, Code: CodeKeyForgotten, Now: sw.now,
			Actor: ActorPolicy, Note: withheldNote},
		fate:   fateUnknown,
		out:    Dispatched{Kind: DispatchUnknown, Code: CodeKeyForgotten},
		unsent: true,
	}
}
