package turnframe

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// This file holds what a Dispatcher does besides sweeping: settling the rows
// whose outcome is unknown, and releasing the claims of a crashed one.

// ReleaseExpiredClaims moves every row still Dispatching whose lease ended
// at now back to Pending, so a sweep can claim it again, and returns their
// ids. It is for rows a dispatcher that died left behind: a live RunOnce
// keeps extending the leases of the rows it holds, so it never loses one
// this way. A released row whose send had started is sent again under the
// same key: at least once, for that case. Its error wraps the store's.
func (d *Dispatcher) ReleaseExpiredClaims(ctx context.Context, now time.Time) ([]OutboxID, error) {
	ids, err := d.store.ReleaseExpiredClaims(ctx, now)
	if err != nil {
		return nil, fmt.Errorf("release expired claims: %w", err)
	}
	if len(ids) > 0 {
		d.obs.logf(ctx, slog.LevelWarn, "turnframe: released outbox claims whose lease ended",
			slog.Int("rows", len(ids)), slog.Time("now", now))
	}
	return ids, nil
}

// Reconcile settles one row whose outcome is unknown through reconciler and
// returns its answer. The row is read; a row in any other status (or one
// another caller resolved meanwhile) is left alone and answered
// VerdictUnresolved with no error: reconciliation is for the rows nobody
// knows about. Otherwise reconciler is called under SendTimeout — a panic, a
// timeout or a verdict out of range counts as VerdictUnresolved and is
// logged — and the row is resolved with the verdict at now: Completed,
// Failed with the answer's code, or Pending due at now (resend).
// VerdictUnresolved writes nothing.
//
// Errors: ErrInvalid for a zero id or a now out of range, before anything
// is read; otherwise they wrap the store's: ErrNotFound for no such row,
// ErrConflict when the row left OutcomeUnknown between the read and the
// write, ErrInvalid for a code the store refuses. With an error nothing was written, and the answer
// returned is the reconciler's (or VerdictUnresolved when it was not asked).
// Reconcile panics if reconciler is nil.
func (d *Dispatcher) Reconcile(ctx context.Context, id OutboxID, reconciler Reconciler, now time.Time) (Reconciled, error) {
	if reconciler == nil {
		panic("turnframe: Dispatcher.Reconcile with a nil reconciler")
	}
	unresolved := Reconciled{Verdict: VerdictUnresolved}
	if err := CheckID("id", id); err != nil {
		return unresolved, err
	}
	if err := CheckTime("now", now); err != nil {
		return unresolved, err // before the reconciler is asked anything
	}
	rec, err := d.store.GetOutbox(ctx, id)
	if err != nil {
		return unresolved, fmt.Errorf("reconcile outbox row %v: %w", id, err)
	}
	logAttrs := []slog.Attr{slog.String("outbox_id", id.String()), slog.String("destination", rec.Destination), slog.Int("attempt", rec.Attempts)}
	if rec.Status != OutboxOutcomeUnknown {
		d.obs.logf(ctx, slog.LevelDebug, "turnframe: outbox row not reconciled: its outcome is known",
			append(logAttrs, slog.String("status", rec.Status.String()))...)
		return unresolved, nil
	}
	answer := d.askReconciler(ctx, reconciler, rec, logAttrs)
	if answer.Verdict == VerdictUnresolved {
		d.obs.logf(ctx, slog.LevelInfo, "turnframe: outbox row still unknown after reconciliation",
			append(logAttrs, slog.String("outcome", answer.Verdict.String()))...)
		return answer, nil
	}
	if err := d.store.Resolve(ctx, id, answer.Verdict, answer.Code, now); err != nil {
		return answer, fmt.Errorf("reconcile outbox row %v as %v: %w", id, answer.Verdict, err)
	}
	d.obs.count(SignalExternalReconciled, Labels{Destination: rec.Destination, Outcome: answer.Verdict.String()})
	d.obs.logf(ctx, slog.LevelInfo, "turnframe: outbox row reconciled",
		append(logAttrs, slog.String("outcome", answer.Verdict.String()), slog.String("code", answer.Code))...)
	return answer, nil
}

// askReconciler calls reconciler through callWithin under SendTimeout. A
// panic, a late answer or a verdict out of range is VerdictUnresolved.
func (d *Dispatcher) askReconciler(ctx context.Context, reconciler Reconciler, rec OutboxRecord, logAttrs []slog.Attr) Reconciled {
	r := callWithin(ctx, d.cfg.SendTimeout, func(rctx context.Context) Reconciled { return reconciler.Reconcile(rctx, rec) })
	switch {
	case r.end == callTimedOut:
		d.obs.logf(ctx, slog.LevelWarn, "turnframe: reconciler did not answer in time; the outcome stays unknown",
			append(logAttrs, slog.String("cause", r.cause.Error()))...)
		return Reconciled{Verdict: VerdictUnresolved}
	case r.end == callPanicked:
		d.obs.logf(ctx, slog.LevelError, "turnframe: reconciler panicked; the outcome stays unknown",
			append(logAttrs, slog.Any("panic", r.panic), slog.String("stack", string(r.stack)))...)
		return Reconciled{Verdict: VerdictUnresolved}
	case r.value.Verdict > VerdictResend:
		d.obs.logf(ctx, slog.LevelError, "turnframe: reconciler answered a verdict out of range; the outcome stays unknown",
			append(logAttrs, slog.Int("verdict", int(r.value.Verdict)))...)
		return Reconciled{Verdict: VerdictUnresolved}
	}
	return r.value
}
