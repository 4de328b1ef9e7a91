package turnframe_test

import (
	"context"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/memstore"
)

// The policy reads a subject's whole history, a page of MaxLimit records
// at a time, to count the lookups and resends already spent. Reading on
// only while a page came back shorter than MaxLimit was never tested (no
// subject had that many records): a reader stopping after one full page
// survived, and a lookup recorded past the first page went uncounted, so
// the remote was asked again past VerifyTries. Here a row's lookup that
// could not tell is recorded after MaxLimit late answers; a Recovery
// allowing one lookup escalates without asking again. memstore only:
// writing MaxLimit records one at a time to SQLite takes some twenty
// seconds under -race, and the paging is the policy's, not the store's.
func TestThePolicyCountsALookupRecordedPastAFullPageOfHistory(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	store := memstore.New()
	t.Cleanup(func() { store.Close() })
	row := polUnknownRow(t, store, "k1", "payments")
	subject := turnframe.OutboxSubject(rtAccount, row.ID)
	for range turnframe.MaxLimit {
		is.NoErr(store.RecordEvidence(ctx, turnframe.NewEvidence(subject, "", turnframe.ActorApp,
			turnframe.CodeLateAnswer, "", "a send answered after its deadline", dispNow)))
	}
	pol := &polUnsure{t: t, store: store, clock: newPolClock(dispNow.Add(time.Minute))}
	is.Equal(pol.recoverWith(3), turnframe.PolicyUnsure) // the first lookup, recorded past the first page
	h, err := store.History(ctx, subject, 0, turnframe.MaxLimit)
	is.NoErr(err)
	is.Equal(len(h), turnframe.MaxLimit)                                    // the first page is full
	is.Equal(polEvidence(t, store, subject, turnframe.CodeVerifyUnsure), 0) // and holds no lookup
	pol.clock.Add(time.Hour)                                                // the backoff ran
	is.Equal(pol.recoverWith(1), turnframe.PolicyEscalated)                 // one lookup is all one try allows
	is.Equal(pol.asked, 1)                                                  // not asked a second time
	is.Equal(dispGet(t, store, row.ID).LastCode, turnframe.CodeVerifyExhausted)
}
