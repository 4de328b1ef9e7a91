package turnframe_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

// Deliver and Abandon fit a replay record that breaks today's rules (one
// an earlier release kept) to them, and warn that they did. A fitting that
// no longer asked whether the record keeps the rules survived every test:
// what it writes back is the same, but every turn's end warned of an
// earlier release's record. The warning must come for such a record alone.
func TestOnlyAReplayRecordThatBreaksTodaysRulesIsReportedFittedAsItsTurnEnds(t *testing.T) {
	const fittedMsg = "a replay record an earlier release kept breaks today's rules"
	for _, tc := range []struct {
		name string
		old  string // the record as an earlier release stored it; "" leaves Plan's
		want int32  // warnings of a fitted record, over the turn delivered and the one abandoned
	}{
		{"AsPlanWroteIt", "", 0},
		{"WithACaseKeyThatHasANulByte", `{"LoadedCases":["flight\u00001","flight/2"]}`, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			ctx := context.Background()
			store, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "turnframe.db"))
			is.NoErr(err)
			t.Cleanup(func() { store.Close() })
			var fitted atomic.Int32
			logger := slog.New(hookHandler{Handler: slog.NewTextHandler(io.Discard, nil), hook: func(msg string) {
				if strings.Contains(msg, fittedMsg) {
					fitted.Add(1)
				}
			}})
			rt := turnframe.New(store, turnframe.WithLogger(logger))
			planned := func() turnframe.TurnID {
				turn, err := rt.Receive(ctx, rtAccount, rt.NewConversationID(), "what do I have booked?")
				is.NoErr(err)
				_, err = rt.Plan(ctx, rtAccount, turn, turnframe.Plan{
					LoadedCases: []turnframe.CaseKey{"booking/1", "booking/2"},
					Understanding: &turnframe.Understanding{Questions: []turnframe.UnderstoodQuestion{
						{Unit: 1, Words: turnframe.WordRange{First: 0, Last: 4, Start: 0, End: 22}, Basis: turnframe.BasisCurrentCommittedState},
					}},
				})
				is.NoErr(err)
				if tc.old != "" {
					tx, err := store.BeginTx(ctx)
					is.NoErr(err)
					_, err = tx.ExecContext(ctx, `UPDATE turns SET replay = ? WHERE id = ?`, tc.old, turn.String())
					is.NoErr(err)
					is.NoErr(tx.Commit())
				}
				rec, err := store.Replay(ctx, rtAccount, turn)
				is.NoErr(err)
				is.Equal(rec.Validate() != nil, tc.want > 0) // the record keeps today's rules, or breaks them
				return turn
			}
			delivered, abandoned := planned(), planned()
			is.NoErr(rt.Deliver(ctx, rtAccount, delivered, "here they are"))
			is.NoErr(rt.Abandon(ctx, rtAccount, abandoned, "gave_up"))
			is.Equal(fitted.Load(), tc.want) // a fitting is reported for a record that needed one, and only then
		})
	}
}
