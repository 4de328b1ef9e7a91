package turnframe

import (
	"context"
	"time"
)

// The four one-row settlements, written once over OutboxStore.Settle for
// every store: a store implements Settle, and these are what tests,
// operators' tools and a hand-written sender loop call to settle one claim.

// CompleteClaim settles the claimed row Completed with the remote's
// reference, in one transaction of s.Settle. ErrClaimLost, changing nothing,
// unless the row is still Dispatching under the claim; ErrInvalid for a bad
// claim or a now out of range; otherwise the store's error for the call.
func CompleteClaim(ctx context.Context, s OutboxStore, claim Claim, remoteRef string, now time.Time) error {
	return settleClaim(ctx, s, OutboxSettlement{Claim: claim, To: OutboxCompleted, RemoteRef: remoteRef, Now: now})
}

// RetryClaim settles the claimed row back to Pending, due at at, keeping
// code as its last code. The row's update time is the claim's time: a retry
// takes no clock of its own. Errors as for CompleteClaim.
func RetryClaim(ctx context.Context, s OutboxStore, claim Claim, code string, at time.Time) error {
	return settleClaim(ctx, s, OutboxSettlement{Claim: claim, To: OutboxPending, Code: code, RetryAt: at, Now: claim.ClaimedAt})
}

// FailClaim settles the claimed row Failed with code. Errors as for
// CompleteClaim.
func FailClaim(ctx context.Context, s OutboxStore, claim Claim, code string, now time.Time) error {
	return settleClaim(ctx, s, OutboxSettlement{Claim: claim, To: OutboxFailed, Code: code, Now: now})
}

// MarkClaimUnknown settles the claimed row OutcomeUnknown: it is never
// claimed again until a resolution moves it (the policy, Recovery.Settle).
// Errors as for CompleteClaim.
func MarkClaimUnknown(ctx context.Context, s OutboxStore, claim Claim, remoteRef string, now time.Time) error {
	return settleClaim(ctx, s, OutboxSettlement{Claim: claim, To: OutboxOutcomeUnknown, RemoteRef: remoteRef, Now: now})
}

// settleClaim applies one settlement and returns its own outcome.
func settleClaim(ctx context.Context, s OutboxStore, st OutboxSettlement) error {
	results, err := s.Settle(ctx, []OutboxSettlement{st})
	if err != nil {
		return err
	}
	return results[0]
}
