package turnframe_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// Commit's doc: "events and msgs are copied; the caller may reuse them."
// Commit copied the two slices but not the bytes they hold, and Events and
// Outbox hand out the same bytes again. So a handler that reuses its
// buffer once it built its outcome (one scratch buffer per handler, as
// encoders do), or a middleware that masks what it logs of an outcome's
// events, changed what Execute committed: the event and the outbox row
// (sent to the remote) held bytes the handler never committed.
func TestACommitKeepsWhatItWasGiven(t *testing.T) {
	const committed, other = `{"card":"4111"}`, `{"card":"****"}`
	for name, h := range map[string]turnframe.Handler{
		"TheHandlerReusesItsBuffer": turnframe.HandlerFunc(func(_ context.Context, call turnframe.Call) turnframe.Outcome {
			buf := []byte(committed)
			out := turnframe.Commit([]turnframe.Event{{Case: call.Command.Case, Type: "charged", Data: buf}},
				turnframe.OutboxMessage{Destination: "payments", Payload: buf})
			copy(buf, other) // the buffer is the handler's again: it encodes the next thing into it
			return out
		}),
		"AMiddlewareMasksWhatItLogs": turnframe.HandlerFunc(func(_ context.Context, call turnframe.Call) turnframe.Outcome {
			out := turnframe.Commit([]turnframe.Event{{Case: call.Command.Case, Type: "charged", Data: []byte(committed)}},
				turnframe.OutboxMessage{Destination: "payments", Payload: []byte(committed)})
			for _, ev := range out.Events() { // a copy of the events, by its doc and its code
				copy(ev.Data, other)
			}
			for _, m := range out.Outbox() {
				copy(m.Payload, other)
			}
			return out
		}),
	} {
		t.Run(name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				ctx := context.Background()
				rt := turnframe.New(store)
				turn := rtPlanned(t, rt, rtAccount, rtCmd("k1", "card/7", "charge"))
				report, err := rt.Execute(ctx, rtAccount, turn, h)
				is.NoErr(err)
				is.Equal(report.Results[0].Kind, turnframe.ResultCommitted)
				evs, err := store.EventsSince(ctx, rtAccount, "card/7", 0, 10)
				is.NoErr(err)
				is.Equal(string(evs[0].Data), committed) // the event as the handler committed it
				rows, err := store.ListOutbox(ctx, turnframe.OutboxFilter{Limit: 10})
				is.NoErr(err)
				is.True(bytes.Equal(rows[0].Payload, []byte(committed))) // the payload sent is the one committed
			})
		})
	}
}
