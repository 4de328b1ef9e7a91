package pgstore_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
)

// A redelivery writes nothing: its transaction reads the turn the first
// delivery began and commits without ever having had a transaction id.
// Whatever became of its COMMIT — answered, run with its answer lost, lost
// on its way, or held by a cut the server has not seen — the database is
// the same, and the answer it read stands. It was an error ("conn
// closed"): neither the answer nor ErrBusy, as if a turn might have been
// begun.
func TestARedeliveryWhoseCommitGoesUnansweredIsARedelivery(t *testing.T) {
	cuts := []struct {
		name string
		arm  func(k *answerCutter) *atomic.Bool
	}{
		{"AnswerLost", func(k *answerCutter) *atomic.Bool { return &k.armed }},
		{"CommitLost", func(k *answerCutter) *atomic.Bool { return &k.sendArmed }},
		{"CommitHeld", func(k *answerCutter) *atomic.Bool { return &k.holdArmed }},
	}
	modes := []struct {
		name string
		mode pgx.QueryExecMode
	}{
		{"Extended", pgx.QueryExecModeCacheStatement},
		{"SimpleProtocol", pgx.QueryExecModeSimpleProtocol},
	}
	for _, m := range modes {
		for _, c := range cuts {
			t.Run(m.name+"/"+c.name, func(t *testing.T) {
				is := is.New(t)
				ctx := context.Background()
				cfg, k := cutterConfig(t)
				cfg.ConnConfig.DefaultQueryExecMode = m.mode
				s := storeOnPool(t, cfg, pgstore.CallerClock)
				rt := turnframe.New(s)
				in := turnframe.Inbound{Account: "acme", Conversation: rt.NewConversationID(), MessageID: "upd-1", Text: "hello"}
				first, err := rt.ReceiveMessage(ctx, in)
				is.NoErr(err) // the first delivery

				c.arm(k).Store(true) // the redelivery's COMMIT goes unanswered
				again, err := rt.ReceiveMessage(ctx, in)
				t.Logf("redelivery with its COMMIT cut: %+v, %v", again, err)
				is.Equal(k.cut.Load(), int64(1)) // the COMMIT was cut
				is.NoErr(err)                    // the redelivery is answered
				is.True(again.Redelivered)       // as a redelivery
				is.Equal(again.Turn, first.Turn) // of the first delivery's turn
				var turns int
				is.NoErr(s.Pool().QueryRow(ctx, `SELECT count(*) FROM turns`).Scan(&turns))
				is.Equal(turns, 1) // and nothing was begun
			})
		}
	}
}
