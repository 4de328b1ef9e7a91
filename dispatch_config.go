package turnframe

import (
	"fmt"
	"maps"
	"time"
)

// Defaults of DispatchConfig, used for every field left at its zero value.
const (
	DefaultBatchSize         = 16
	DefaultSendTimeout       = 30 * time.Second
	DefaultInitialBackoff    = time.Second
	DefaultMaxBackoff        = time.Minute
	DefaultBackoffMultiplier = 4
	DefaultMaxAttempts       = 5
	DefaultConcurrency       = 1
	DefaultPollInterval      = time.Second
	DefaultGracePeriod       = 10 * time.Second
)

// DefaultLeaseMargin is how long a lease runs past the time its holder's
// call may take, unless configured: DispatchConfig.LeaseMargin for an
// outbox claim (past SendTimeout), WithLeaseMargin for a command's attempt
// (past the command timeout).
const DefaultLeaseMargin = 30 * time.Second

// DispatchConfig is how a Dispatcher works. Every field but WorkerID may be
// left zero (or negative) and then takes its default; WorkerID is required.
// A nil DestinationLimits limits no destination.
// DefaultDispatchConfig returns the defaults spelled out.
type DispatchConfig struct {
	// WorkerID is the name rows are claimed under (CheckWorker: 1–193
	// printable bytes of UTF-8, no space at either end),
	// distinct per dispatcher (per process, or per dispatcher when one
	// process runs several). A settlement presents it as part of its claim.
	WorkerID string
	// BatchSize is how many rows one RunOnce claims at most: 1 to MaxLimit.
	BatchSize int
	// SendTimeout bounds one Sender.Send.
	// A send that has not answered by then is outcome unknown, never a
	// retry: the request may have left, and nobody can say it did not land.
	SendTimeout time.Duration
	// InitialBackoff is the delay before the second attempt of a row.
	InitialBackoff time.Duration
	// MaxBackoff caps every later delay.
	MaxBackoff time.Duration
	// BackoffMultiplier multiplies the delay for each further attempt.
	BackoffMultiplier int
	// MaxAttempts is how many attempts a row gets: a retryable outcome of
	// attempt MaxAttempts (or later) fails the row with
	// CodeAttemptsExhausted.
	MaxAttempts int
	// Concurrency is how many rows of one claimed batch are sent at once
	// (at most MaxLimit: a larger value is MaxLimit).
	// 1 sends them one after another, in claim order.
	Concurrency int
	// LeaseMargin is how long a claim's lease runs past the SendTimeout of
	// a send that starts at once: a claim is leased for SendTimeout +
	// LeaseMargin, and RunOnce extends the lease of every row it has not
	// settled yet, in good time, for as long as it runs. Only a lease that
	// ended is expired (Recovery.Recover), so a dispatcher that died
	// holds its rows for at most that long.
	LeaseMargin time.Duration
	// PollInterval is how often Run looks for due rows when nothing woke
	// it: rows enqueued by another process, or by a store that is not an
	// EnqueueNotifier, and retries whose backoff ran out, are claimed
	// within about this long. Each poll also releases ended leases and
	// applies the uncertainty policy (see Run).
	PollInterval time.Duration
	// GracePeriod is how long Run, once its context ended, lets the sends
	// in flight go on before it cuts them: a send still unanswered then is
	// outcome unknown (CodeSendTimeout), never a retry.
	GracePeriod time.Duration
	// DestinationLimits caps, per destination, how many sends to it this
	// Dispatcher makes at once, across all its concurrent sends (of one
	// RunOnce, of concurrent RunOnce calls, of Run). A destination absent,
	// or with a limit of 0 or less, is capped by Concurrency only; a limit
	// above MaxLimit is MaxLimit. A claimed row waits for its
	// destination's turn, its lease kept alive; if the sweep's context ends
	// first it is not sent (CodeNotSent), and if what is left of its lease
	// would end before its send's deadline (the keeper could not extend
	// it), its claim is renewed first, or, refused, it is not sent. A
	// send gives its place back when it ends or when SendTimeout passes,
	// whichever is first: a Sender that ignores its context and runs on
	// past its deadline no longer counts. The Dispatcher keeps its own copy
	// of the map.
	DestinationLimits map[string]int
}

// DefaultDispatchConfig returns the configuration a dispatcher claiming under
// workerID uses by default: sixteen rows a sweep, thirty seconds a send, a
// backoff of one second growing fourfold up to a minute, five attempts, and
// one send at a time, and claims leased thirty seconds past the send timeout;
// Run polls every second and gives sends in flight ten seconds at shutdown;
// no destination limit.
func DefaultDispatchConfig(workerID string) DispatchConfig {
	return DispatchConfig{
		WorkerID:          workerID,
		BatchSize:         DefaultBatchSize,
		SendTimeout:       DefaultSendTimeout,
		InitialBackoff:    DefaultInitialBackoff,
		MaxBackoff:        DefaultMaxBackoff,
		BackoffMultiplier: DefaultBackoffMultiplier,
		MaxAttempts:       DefaultMaxAttempts,
		Concurrency:       DefaultConcurrency,
		LeaseMargin:       DefaultLeaseMargin,
		PollInterval:      DefaultPollInterval,
		GracePeriod:       DefaultGracePeriod,
	}
}

// withDefaults returns c with every zero or negative field but WorkerID
// replaced by its default.
func (c DispatchConfig) withDefaults() DispatchConfig {
	d := DefaultDispatchConfig(c.WorkerID)
	d.BatchSize = positiveOr(c.BatchSize, d.BatchSize)
	d.SendTimeout = positiveOr(c.SendTimeout, d.SendTimeout)
	d.InitialBackoff = positiveOr(c.InitialBackoff, d.InitialBackoff)
	d.MaxBackoff = positiveOr(c.MaxBackoff, d.MaxBackoff)
	d.BackoffMultiplier = positiveOr(c.BackoffMultiplier, d.BackoffMultiplier)
	d.MaxAttempts = positiveOr(c.MaxAttempts, d.MaxAttempts)
	// More sends at once than a claim can return rows (MaxLimit) is no
	// bound at all; Run sizes its bookkeeping by it.
	d.Concurrency = min(positiveOr(c.Concurrency, d.Concurrency), MaxLimit)
	d.LeaseMargin = positiveOr(c.LeaseMargin, d.LeaseMargin)
	d.PollInterval = positiveOr(c.PollInterval, d.PollInterval)
	d.GracePeriod = positiveOr(c.GracePeriod, d.GracePeriod)
	d.DestinationLimits = maps.Clone(c.DestinationLimits)
	return d
}

// Lease returns how long a claim is leased for, and extended by, at a time:
// SendTimeout + LeaseMargin, defaults filled in, at most a hundred years
// (a huge timeout must not overflow it: every claim would be refused).
func (c DispatchConfig) Lease() time.Duration {
	c = c.withDefaults()
	if c.SendTimeout > maxLease-c.LeaseMargin {
		return maxLease
	}
	return min(c.SendTimeout+c.LeaseMargin, maxLease)
}

// positiveOr returns v when it is positive, else def.
func positiveOr[T int | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// validate reports what is wrong with a configuration after defaults: a
// worker id the stores would refuse, or a batch no store claims.
func (c DispatchConfig) validate() error {
	if err := CheckWorker(c.WorkerID); err != nil {
		return fmt.Errorf("dispatch config: %w", err)
	}
	if err := CheckLimit("batch size", c.BatchSize); err != nil {
		return fmt.Errorf("dispatch config: %w", err)
	}
	return nil
}

// BackoffFor returns the delay after attempt number attempt (1-based) before
// the next one: InitialBackoff after attempts 0 and 1, then InitialBackoff ×
// BackoffMultiplier^(attempt−1), capped at MaxBackoff. It never overflows: a
// delay past the cap, however large the attempt, is the cap. Zero fields take
// their defaults, as in a Dispatcher, so with the defaults the delays are
// 1 s, 1 s, 4 s, 16 s, 60 s, 60 s, … for attempts 0, 1, 2, 3, 4, 5, ….
func (c DispatchConfig) BackoffFor(attempt int) time.Duration {
	c = c.withDefaults()
	d, mult := c.InitialBackoff, time.Duration(c.BackoffMultiplier)
	// Each step multiplies by at least 2 until the cap, so at most 63
	// steps reach any cap a Duration holds, whatever attempt is.
	for step := 1; step < attempt && d < c.MaxBackoff && mult > 1; step++ {
		if d > c.MaxBackoff/mult {
			return c.MaxBackoff // the next step passes the cap (and may overflow)
		}
		d *= mult
	}
	return min(d, c.MaxBackoff)
}

// DispatchReport is what one RunOnce did with the rows it claimed. Each
// claimed row is in exactly one list, and each list is in claim order.
type DispatchReport struct {
	// Completed rows: the remote confirmed.
	Completed []OutboxID
	// Retried rows are Pending again, due after a backoff (or at once when
	// RunOnce's context ended before they were sent: CodeNotSent).
	Retried []OutboxID
	// Failed rows: the remote refused them, or their attempts ran out.
	Failed []OutboxID
	// Unknown rows are OutcomeUnknown: they may have reached the remote and
	// wait for the policy of their destination's Remote (Recovery.Recover)
	// or Recovery.Settle. They are never sent again by the
	// dispatcher on its own. A resend the Dispatcher withheld, unsent, is
	// listed here too (CodeKeyForgotten; see RunOnce).
	Unknown []OutboxID
	// Unsettled rows were sent (or not) but the store refused their
	// settlement for good: the claim was lost (its lease ended and recovery
	// expired the row, or an operator released it), the store was closed,
	// or it stayed busy past the end of the caller's context and the rows'
	// leases. The store keeps them as it has them; the send's outcome was
	// logged at error level and, for a lost claim, recorded in the row's
	// history as evidence. A row still Dispatching is expired to
	// OutcomeUnknown by Recovery.Recover once its lease ended.
	Unsettled []OutboxID
}

// Claimed returns how many rows the sweep claimed: the length of all lists.
func (r DispatchReport) Claimed() int {
	return len(r.Completed) + len(r.Retried) + len(r.Failed) + len(r.Unknown) + len(r.Unsettled)
}

// IsEmpty reports whether the sweep found nothing due.
func (r DispatchReport) IsEmpty() bool { return r.Claimed() == 0 }
