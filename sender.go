package turnframe

import (
	"context"
	"strings"
	"time"
)

// libraryCodePrefix begins every code the library writes; a Sender's code
// may not (Dispatched.Code).
const libraryCodePrefix = "turnframe."

// SenderCode returns the code the dispatcher keeps for code, the code of a
// Sender's answer (Dispatched.Code): code itself, unless it is the
// library's (it begins "turnframe.") or no store keeps it (over 200 bytes,
// or not UTF-8): then CodeInvalidCode. An adapter that reports a send's
// code (otelturnframe's error.type) reports this one, so that it says what
// the row was settled with.
func SenderCode(code string) string {
	if strings.HasPrefix(code, libraryCodePrefix) || CheckCode("code", code) != nil {
		return CodeInvalidCode
	}
	return code
}

// Codes the dispatcher records or reports on its own. Every other code is
// the one a Sender chose.
const (
	// CodeAttemptsExhausted is the code of a row failed because a retryable
	// outcome came at or after DispatchConfig.MaxAttempts.
	CodeAttemptsExhausted = "turnframe.dispatch.attempts_exhausted"
	// CodeNotSent is the code of a claimed row put back Pending, due at once,
	// because RunOnce's context ended before its send started. Nothing left.
	CodeNotSent = "turnframe.dispatch.not_sent"
	// CodeSendTimeout is the code of a row whose send did not answer within
	// DispatchConfig.SendTimeout (or answered only after it): Unknown.
	CodeSendTimeout = "turnframe.dispatch.send_timeout"
	// CodeSenderPanic is the code of a row whose send panicked: Unknown, as
	// the panic may have come after the bytes left.
	CodeSenderPanic = "turnframe.dispatch.sender_panic"
	// CodeInvalidCode replaces a code a Sender returned that no store keeps
	// (over 200 bytes, or not UTF-8), or that is the library's (it begins
	// "turnframe."), so the row still settles as classified.
	CodeInvalidCode = "turnframe.dispatch.invalid_code"
)

// DispatchKind is how one send ended, as its Sender classifies it. The zero
// value is DispatchUnknown: a Sender that returns Dispatched{} has not said
// the request did not leave, so it is treated as if it may have.
type DispatchKind uint8

const (
	// DispatchUnknown: the request may have left and no answer came back;
	// the effect may exist. The row becomes OutcomeUnknown and is never sent
	// again blindly (I15): the destination's Remote policy (Recovery.Recover)
	// or Recovery.Settle moves it on.
	DispatchUnknown DispatchKind = iota
	// DispatchCompleted: the remote accepted it and said so. The row becomes
	// Completed.
	DispatchCompleted
	// DispatchRetryable: it demonstrably did not arrive (not one byte of the
	// request left, or the remote said it did not take it), so sending it
	// again is safe. The row becomes Pending after a backoff, or Failed with
	// CodeAttemptsExhausted once its attempts are spent.
	DispatchRetryable
	// DispatchPermanent: the remote refused it and would refuse it again.
	// The row becomes Failed.
	DispatchPermanent
)

var dispatchKindNames = [...]string{"unknown", "completed", "retryable", "permanent"}

// String returns the kind in snake case: "completed", "retryable",
// "permanent" or "unknown".
func (k DispatchKind) String() string {
	return enumName(dispatchKindNames[:], int(k), "dispatch kind")
}

// Dispatched is how one send ended. There is no error beside it on purpose:
// every failure of a remote call lands in exactly one of the four kinds, and
// choosing the kind answers the only question that matters — may this be
// sent again? A Kind out of range counts as DispatchUnknown.
type Dispatched struct {
	Kind DispatchKind
	// Code is a stable, short reason ("http.503"), never free text, at
	// most 200 bytes of UTF-8. It is stored as the row's last code, whatever
	// the kind, and logged. Codes beginning "turnframe." are the library's
	// (the policy reads some of them, e.g. CodeLeaseEnded): a Sender's is
	// replaced by CodeInvalidCode, so no answer can pass for the library's
	// own finding.
	Code string
	// RemoteRef is the remote's reference for Completed and Unknown, if it
	// gave one (at most 1024 bytes of UTF-8; a longer one is dropped).
	RemoteRef string
	// RetryAfter is, for DispatchRetryable only, the least the remote asked
	// to be left alone for (HTTPSender reads it from Retry-After). The row
	// is then due after max(the dispatcher's backoff, RetryAfter), capped by
	// the backoff cap, DispatchConfig.MaxBackoff; when RetryAfter decides
	// the wait it counts from the answer (to the whole second, by the
	// dispatcher's clock), so a slow answer does not shorten the wait the
	// remote asked for. Zero or negative leaves the
	// backoff alone; it is ignored for every other kind.
	RetryAfter time.Duration
}

// Sender calls the remote system for one outbox row. The implementation owns
// the transport and the credentials; the Dispatcher owns the bookkeeping.
// The obligations are the implementation's:
//
//   - Honour the context. Send is called on a goroutine of its own under a
//     context carrying DispatchConfig.SendTimeout. An answer counts only if
//     Send returned it while that context was live: a Send that returns
//     after its deadline — even one that honours ctx with
//     `<-ctx.Done(); return …`, even with DispatchRetryable — is recorded
//     DispatchUnknown, because the request may have left while it waited.
//     Go cannot stop a goroutine from outside, so a Send that ignores its
//     context keeps running until it returns, and its late answer is
//     discarded unread. A Send that panics is recorded DispatchUnknown too
//     (it may have panicked after the bytes left); the panic is logged. To
//     report "nothing left, send again" for a connection that never opened,
//     give connecting a timeout of its own below the send deadline, as
//     HTTPSender does.
//   - Forward entry.RemoteKey() as the idempotency key, in whatever header
//     or field the remote deduplicates on. It is the key the command was
//     admitted under, qualified by its account, so a row sent again after a
//     crash is one effect, and two tenants that both used the key "k1" are
//     two. Forward entry.Key instead only if the remote is per tenant. Never
//     invent a key: a fresh one per send defeats the remote's deduplication.
//   - Classify honestly. DispatchRetryable only when the request certainly
//     did not arrive; a transport error after bytes may have been written
//     is DispatchUnknown. If you cannot tell the two apart, it is
//     DispatchUnknown.
//
// Send may be called for several rows at once (DispatchConfig.Concurrency)
// and must be safe for concurrent use.
type Sender interface {
	Send(ctx context.Context, entry OutboxEntry) Dispatched
}

// SenderFunc adapts a function to a Sender.
type SenderFunc func(ctx context.Context, entry OutboxEntry) Dispatched

// Send calls f(ctx, entry).
func (f SenderFunc) Send(ctx context.Context, entry OutboxEntry) Dispatched { return f(ctx, entry) }
