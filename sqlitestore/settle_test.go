package sqlitestore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// Settle reads the rows it settles a few at a time; a batch longer than
// that, with a row settled twice (in different reads) and a row that does
// not exist, still gives each settlement its own result.
func TestSettleBatchLongerThanOneRead(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s := mustOpen(t)
	msgs := make([]turnframe.OutboxMessage, 20)
	for i := range msgs {
		msgs[i] = turnframe.OutboxMessage{Destination: fmt.Sprintf("d%d", i)}
	}
	mustCommit(t, s, "acme", "k1", msgs...)
	later := t0.Add(time.Hour)
	claims, err := s.ClaimDue(ctx, later, 20, "w", lease)
	is.NoErr(err)
	is.Equal(len(claims), 20)

	var batch []turnframe.OutboxSettlement
	for _, c := range claims {
		batch = append(batch, turnframe.OutboxSettlement{Claim: c, To: turnframe.OutboxCompleted, Now: later})
	}
	gone := claims[0]
	gone.ID = ids.OutboxID(later)
	batch = append(batch,
		turnframe.OutboxSettlement{Claim: claims[0], To: turnframe.OutboxFailed, Code: "x", Now: later}, // again
		turnframe.OutboxSettlement{Claim: gone, To: turnframe.OutboxCompleted, Now: later},              // no such row
	)
	results, err := s.Settle(ctx, batch)
	is.NoErr(err)
	is.Equal(len(results), 22)
	for i := range 20 {
		is.NoErr(results[i])
	}
	is.True(errors.Is(results[20], turnframe.ErrClaimLost))
	is.True(errors.Is(results[21], turnframe.ErrClaimLost))
	row, err := s.GetOutbox(ctx, claims[0].ID)
	is.NoErr(err)
	is.Equal(row.Status, turnframe.OutboxCompleted) // the second settlement changed nothing
}
