package turnframe_test

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
	_ "modernc.org/sqlite"
)

// I15: "A call that left and got no answer — a timeout, … — is outcome
// unknown. It is reconciled against the remote, never repeated
// automatically." and DESIGN §4: ErrBusy is "the one transient error: …
// nothing was written, the same call may be tried again."
//
// A handler calls a payment remote and answers (no answer came: Unknown; or
// the charge went through: Commit). Just then an operator's tool holds the
// file's write lock past the busy timeout, so Execute's write of the outcome
// is refused as ErrBusy. Execute gave the write up at once (the Dispatcher
// tries a busy settlement again until it lands): the entry stayed Executing
// under an attempt nobody runs, and once its lease ended the app's next
// Execute — tried again, as ErrBusy invites — took it over and called the
// remote again, blindly. Execute now writes a known outcome again while
// the attempt's lease lasts.
func TestAKnownOutcomeRefusedAsBusyIsWrittenNotRunAgain(t *testing.T) {
	for _, tc := range []struct {
		name    string
		outcome func(turnframe.Call) turnframe.Outcome
		want    turnframe.JournalStatus
	}{
		{"unknown", func(turnframe.Call) turnframe.Outcome { return turnframe.Unknown("") }, turnframe.JournalOutcomeUnknown},
		{"commit", func(c turnframe.Call) turnframe.Outcome {
			return turnframe.Commit([]turnframe.Event{{Case: c.Command.Case, Type: "paid"}})
		}, turnframe.JournalCommitted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "turnframe.db")
			store, err := sqlitestore.Open(ctx, path, sqlitestore.WithBusyTimeout(20*time.Millisecond))
			is.NoErr(err)
			t.Cleanup(func() { store.Close() })

			// The operator's connection: another sql.DB on the same file.
			op, err := sql.Open("sqlite", "file:"+path)
			is.NoErr(err)
			t.Cleanup(func() { op.Close() })
			opConn, err := op.Conn(ctx)
			is.NoErr(err)
			t.Cleanup(func() { opConn.Close() })

			// The operator lets go as soon as the runtime has met the lock
			// once, whatever it then says it does.
			var calls atomic.Int32
			var released sync.Once
			letGo := func(string) {
				if calls.Load() == 0 {
					return // not yet locked
				}
				released.Do(func() {
					if _, err := opConn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
						t.Errorf("operator unlock: %v", err)
					}
				})
			}
			logger := slog.New(hookHandler{Handler: slog.NewTextHandler(io.Discard, nil), hook: letGo})

			now := dispNow
			rt := turnframe.New(store, turnframe.WithClock(func() time.Time { return now }),
				turnframe.WithCommandTimeout(time.Minute), turnframe.WithLogger(logger))
			turn, err := rt.Receive(ctx, "acme", rt.NewConversationID(), "pay the invoice")
			is.NoErr(err)
			_, err = rt.Plan(ctx, "acme", turn, turnframe.Plan{Commands: []turnframe.Command{
				{Key: "pay-1", Case: "invoice/1", Name: "pay", Payload: []byte(`{"eur":100}`)},
			}})
			is.NoErr(err)

			h := turnframe.HandlerFunc(func(ctx context.Context, call turnframe.Call) turnframe.Outcome {
				if calls.Add(1) == 1 {
					// The payment left. Meanwhile the operator's tool takes
					// the write lock.
					if _, err := opConn.ExecContext(ctx, "BEGIN EXCLUSIVE"); err != nil {
						t.Errorf("operator lock: %v", err)
					}
				}
				return tc.outcome(call)
			})
			_, err = rt.Execute(ctx, "acme", turn, h)
			is.NoErr(err) // the outcome was written once the lock was let go

			// The app runs the turn again; and again after the attempt's
			// lease (recovery's ResumeCommands does the same).
			_, err = rt.Execute(ctx, "acme", turn, h)
			is.NoErr(err)
			now = now.Add(time.Hour)
			_, err = rt.Execute(ctx, "acme", turn, h)
			is.NoErr(err)

			e, err := store.ByKey(ctx, "acme", "pay-1")
			is.NoErr(err)
			is.Equal(e.Status, tc.want)      // the outcome the handler gave
			is.Equal(calls.Load(), int32(1)) // and the payment was never made again
		})
	}
}
