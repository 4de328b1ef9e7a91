package turnframe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// DefaultRecoveryInterval is how often Recovery.Run recovers, unless
// RecoveryLoop.Interval says otherwise.
const DefaultRecoveryInterval = 30 * time.Second

// RecoveryLoop is what Recovery.Run does at every pass. Handler is
// required; every other field may be left zero.
type RecoveryLoop struct {
	// Scope is the first pass's scope (at start-up, a zero scope recovers
	// everything). Later passes keep its Account and set UpdatedBefore to
	// now − StaleAfter (MinTime if that is earlier: no turn), so a turn in
	// flight in this or another process is left alone.
	Scope RecoveryScope
	// Handler acts on each turn's decision, as for Recover.
	Handler RecoveryHandler
	// Interval is the time between the end of one pass and the start of
	// the next. Zero or negative: DefaultRecoveryInterval.
	Interval time.Duration
	// StaleAfter is how long a turn must have been left alone before a
	// later pass recovers it. Zero or negative: the command lease
	// (WithCommandTimeout + WithLeaseMargin), after which Execute itself
	// takes a command over.
	StaleAfter time.Duration
	// Report, when not nil, is handed each pass's report and error, on
	// Run's goroutine, before the next pass is timed. Nil: an error is
	// logged at warning level; the report is dropped (Recover logs what
	// needs a person as it goes).
	Report func(RecoverReport, error)
}

// Run calls Recover at once and then every loop.Interval until ctx ends,
// on the caller's goroutine: it starts none, so nothing of it outlives the
// call. A pass that fails (a refused listing, a busy file) is reported and
// the next pass runs as planned. Run returns nil when ctx ends (a pass in
// progress then is cut short, as Recover is, and not reported); ErrInvalid
// at once for a nil
// Handler or an invalid Scope; or an error wrapping ErrClosed when a pass
// found the store closed, after reporting it.
func (r *Recovery) Run(ctx context.Context, loop RecoveryLoop) error {
	if isNil(loop.Handler) {
		return invalid("handler", "nil")
	}
	if err := loop.Scope.Validate(); err != nil {
		return err
	}
	every := positiveOr(loop.Interval, DefaultRecoveryInterval)
	stale := positiveOr(loop.StaleAfter, r.cfg.commandLease())
	scope := loop.Scope
	for {
		report, err := r.Recover(ctx, scope, loop.Handler)
		if ctx.Err() != nil {
			return nil
		}
		r.reportPass(ctx, loop.Report, report, err)
		if errors.Is(err, ErrClosed) {
			return fmt.Errorf("recovery run: %w", err)
		}
		t := time.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		// A stale bound before every time a store keeps (a lease of a
		// hundred years, for a command timeout of "none") leaves out every
		// turn; the pass still expires claims and applies the policy.
		cut := r.cfg.now().Add(-stale)
		if cut.Before(MinTime) {
			cut = MinTime
		}
		scope = RecoveryScope{Account: loop.Scope.Account, UpdatedBefore: cut}
	}
}

// reportPass hands one pass's outcome to report, or logs its error.
func (r *Recovery) reportPass(ctx context.Context, report func(RecoverReport, error), rep RecoverReport, err error) {
	if report != nil {
		report(rep, err)
		return
	}
	if err != nil {
		r.obs.logf(ctx, slog.LevelWarn, "turnframe: recovery pass failed; the next pass tries again", slog.String("error", err.Error()))
	}
}
