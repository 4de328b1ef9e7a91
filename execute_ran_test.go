package turnframe_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// CommandResult.Ran "reports whether this Execute called the handler for
// it". It did whenever the handler was entered: the payment may have left
// though its outcome was never written — the store closed under it, or the
// caller's context ended while it ran. Both were reported Ran false.
func TestExecuteReportsRanForAHandlerItCalledWhoseOutcomeWasNotWritten(t *testing.T) {
	for _, tc := range []struct {
		name  string
		local bool
		cut   func(store turnframe.Store, cancel context.CancelFunc) error
		want  error
	}{
		{"the store closed", false, func(s turnframe.Store, _ context.CancelFunc) error { return s.Close() }, turnframe.ErrClosed},
		{"the caller's context ended", false, func(_ turnframe.Store, cancel context.CancelFunc) error { cancel(); return nil }, context.Canceled},
		{"a local command, the store closed", true, func(s turnframe.Store, _ context.CancelFunc) error { return s.Close() }, turnframe.ErrClosed},
		{"a local command, the caller's context ended", true, func(_ turnframe.Store, cancel context.CancelFunc) error { cancel(); return nil }, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				opts := []turnframe.Option{turnframe.WithClock(func() time.Time { return dispNow }), turnframe.WithCommandTimeout(time.Hour)}
				if tc.local {
					opts = append(opts, turnframe.WithLocalCommand("pay"))
				}
				rt := turnframe.New(store, opts...)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				turn, err := rt.Receive(ctx, "acme", rt.NewConversationID(), "pay the invoice")
				is.NoErr(err)
				_, err = rt.Plan(ctx, "acme", turn, turnframe.Plan{Commands: []turnframe.Command{{Key: "pay-1", Case: "invoice/1", Name: "pay"}}})
				is.NoErr(err)
				entered, proceed := make(chan struct{}), make(chan struct{})
				h := turnframe.HandlerFunc(func(context.Context, turnframe.Call) turnframe.Outcome {
					close(entered)
					<-proceed
					return turnframe.Commit([]turnframe.Event{{Case: "invoice/1", Type: "paid"}})
				})
				type result struct {
					r   turnframe.ExecuteReport
					err error
				}
				out := make(chan result, 1)
				go func() {
					r, err := rt.Execute(ctx, "acme", turn, h)
					out <- result{r, err}
				}()
				<-entered
				is.NoErr(tc.cut(store, cancel))
				close(proceed)
				got := <-out
				is.True(errors.Is(got.err, tc.want)) // the cut is the error
				is.Equal(len(got.r.Results), 1)
				is.True(got.r.Results[0].Ran) // the handler was called: it may have acted
			})
		})
	}
}
