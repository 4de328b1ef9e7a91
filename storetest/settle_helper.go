package storetest

import (
	"context"

	"github.com/turnframe/turnframe"
)

// SettleByHelper settles st through the root helper for its status, as a
// dispatcher loop written by hand would: CompleteClaim (st.RemoteRef),
// RetryClaim (st.Code, st.RetryAt), FailClaim (st.Code) or MarkClaimUnknown
// (st.RemoteRef), each at st.Now but the retry, which takes the claim's
// time. It returns handled false, and settles nothing, for a status no
// helper takes; otherwise the helper's error.
func SettleByHelper(ctx context.Context, s turnframe.OutboxStore, st turnframe.OutboxSettlement) (handled bool, err error) {
	switch st.To {
	case turnframe.OutboxCompleted:
		return true, turnframe.CompleteClaim(ctx, s, st.Claim, st.RemoteRef, st.Now)
	case turnframe.OutboxPending:
		return true, turnframe.RetryClaim(ctx, s, st.Claim, st.Code, st.RetryAt)
	case turnframe.OutboxFailed:
		return true, turnframe.FailClaim(ctx, s, st.Claim, st.Code, st.Now)
	case turnframe.OutboxOutcomeUnknown:
		return true, turnframe.MarkClaimUnknown(ctx, s, st.Claim, st.RemoteRef, st.Now)
	}
	return false, nil
}
