package turnframe_test

import (
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// retryAfterServer answers every request with status and, unless
// retryAfter is empty, the header Retry-After: retryAfter.
func retryAfterServer(t *testing.T, status int, retryAfter string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// httpDateIn returns the HTTP-date d from now, in the form http.TimeFormat
// names unless layout is given. HTTP-dates count whole seconds, so the date
// lies within the second before now + d.
func httpDateIn(d time.Duration, layout ...string) string {
	f := http.TimeFormat
	if len(layout) > 0 {
		f = layout[0]
	}
	return time.Now().Add(d).UTC().Format(f)
}

func TestHTTPSenderReadsRetryAfter(t *testing.T) {
	const maxDuration = time.Duration(math.MaxInt64)
	tests := []struct {
		name       string
		status     int
		retryAfter string
		// want is the RetryAfter expected; an HTTP-date in the future may
		// come up to slack short of it (the date's whole seconds, and the
		// time the answer took to arrive).
		want  time.Duration
		slack time.Duration
	}{
		{"delta-seconds", 503, "7", 7 * time.Second, 0},
		{"delta-seconds on a 429", 429, "120", 2 * time.Minute, 0},
		{"leading zeros", 503, "007", 7 * time.Second, 0},
		{"zero", 503, "0", 0, 0},
		{"none: the backoff alone, as before", 503, "", 0, 0},
		{"negative is ignored", 503, "-7", 0, 0},
		{"a sign is not delta-seconds", 503, "+7", 0, 0},
		{"fractional is ignored", 503, "7.5", 0, 0},
		{"garbage is ignored", 429, "soon", 0, 0},
		{"a unit is garbage", 429, "7s", 0, 0},
		{"an HTTP-date in the future", 429, httpDateIn(90 * time.Second), 90 * time.Second, 5 * time.Second},
		{"an HTTP-date in the future, RFC 850 form", 503, httpDateIn(90*time.Second, time.RFC850), 90 * time.Second, 5 * time.Second},
		{"an HTTP-date in the past is 0", 429, httpDateIn(-time.Hour), 0, 0},
		{"an RFC 3339 date is garbage", 429, time.Now().Add(time.Hour).Format(time.RFC3339), 0, 0},
		{"a day is kept as is: the backoff cap bounds it", 503, "86400", 24 * time.Hour, 0},
		{"seconds past a Duration are the largest Duration", 503, "9223372037", maxDuration, 0},
		{"digits past an int64 are the largest Duration", 503, "99999999999999999999", maxDuration, 0},
		{"an HTTP-date past a Duration is the largest Duration", 429, "Fri, 31 Dec 9999 23:59:59 GMT", maxDuration, 0},
		{"ignored on a 500", 500, "7", 0, 0},
		{"ignored on a 502", 502, "7", 0, 0},
		{"ignored on a 408", 408, "7", 0, 0},
		{"ignored on a 200", 200, "7", 0, 0},
		{"ignored on a 301", 301, "7", 0, 0},
		{"ignored on a 404", 404, "7", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			sender, err := turnframe.NewHTTPSender(map[string]string{"payments": retryAfterServer(t, tt.status, tt.retryAfter)})
			is.NoErr(err) // new sender
			got := sender.Send(context.Background(), dispEntry("acme", "k1"))
			is.True(got.RetryAfter <= tt.want)          // not more than asked
			is.True(got.RetryAfter >= tt.want-tt.slack) // not less than asked, but for an HTTP-date's slack
			if tt.want > 0 {
				is.Equal(got.Kind, turnframe.DispatchRetryable) // a delay only on a retryable outcome
			}
		})
	}
}

func TestHTTPSenderRetryAfterLeavesTheClassificationAlone(t *testing.T) {
	tests := []struct {
		status int
		want   turnframe.Dispatched
	}{
		{429, turnframe.Dispatched{Kind: turnframe.DispatchRetryable, Code: "http.429", RetryAfter: 7 * time.Second}},
		{503, turnframe.Dispatched{Kind: turnframe.DispatchRetryable, Code: "http.503", RetryAfter: 7 * time.Second}},
		{408, turnframe.Dispatched{Kind: turnframe.DispatchRetryable, Code: "http.408"}},
		{500, turnframe.Dispatched{Kind: turnframe.DispatchUnknown, Code: "http.500"}},
		{200, turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200"}},
		{400, turnframe.Dispatched{Kind: turnframe.DispatchPermanent, Code: "http.400"}},
	}
	for _, tt := range tests {
		t.Run(http.StatusText(tt.status), func(t *testing.T) {
			is := is.New(t)
			sender, err := turnframe.NewHTTPSender(map[string]string{"payments": retryAfterServer(t, tt.status, "7")})
			is.NoErr(err)                                                                 // new sender
			is.Equal(sender.Send(context.Background(), dispEntry("acme", "k1")), tt.want) // classified as without the header; a delay on 429 and 503 only
		})
	}
}

func TestDispatcherWaitsForRetryAfter(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		retryAfter string
		initial    time.Duration // DispatchConfig.InitialBackoff; 0 for the default, 1 s
		maxBackoff time.Duration // DispatchConfig.MaxBackoff; 0 for the default, 1 min
		settled    turnframe.OutboxStatus
		due        time.Duration // after the sweep's now, for a Pending row
	}{
		{"503 with Retry-After: 7 is due in 7 s", 503, "7", 0, 0, turnframe.OutboxPending, 7 * time.Second},
		{"429 with Retry-After: 7 is due in 7 s", 429, "7", 0, 0, turnframe.OutboxPending, 7 * time.Second},
		{"Retry-After past the backoff cap is due at the cap", 503, "7", 0, 5 * time.Second, turnframe.OutboxPending, 5 * time.Second},
		{"a huge Retry-After is due at the cap", 503, "99999999999999999999", 0, 0, turnframe.OutboxPending, time.Minute},
		{"Retry-After below the backoff waits the backoff", 503, "7", 10 * time.Second, 0, turnframe.OutboxPending, 10 * time.Second},
		{"Retry-After: 0 waits the backoff", 503, "0", 0, 0, turnframe.OutboxPending, time.Second},
		{"503 without Retry-After waits the backoff, as before", 503, "", 0, 0, turnframe.OutboxPending, time.Second},
		{"429 without Retry-After waits the backoff, as before", 429, "", 0, 0, turnframe.OutboxPending, time.Second},
		{"garbage waits the backoff", 503, "soon", 0, 0, turnframe.OutboxPending, time.Second},
		{"429 with an HTTP-date past the cap is due at the cap", 429, httpDateIn(time.Hour), 0, 0, turnframe.OutboxPending, time.Minute},
		{"429 with an HTTP-date in the past waits the backoff", 429, httpDateIn(-time.Hour), 0, 0, turnframe.OutboxPending, time.Second},
		{"Retry-After on a 500 changes nothing", 500, "7", 0, 0, turnframe.OutboxOutcomeUnknown, 0},
		{"Retry-After on a 200 changes nothing", 200, "7", 0, 0, turnframe.OutboxCompleted, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				rows := dispEnqueue(t, store, "acme", "k1", turnframe.OutboxMessage{Destination: "payments", Payload: []byte(`{"amount":100}`)})
				sender, err := turnframe.NewHTTPSender(map[string]string{"payments": retryAfterServer(t, tt.status, tt.retryAfter)})
				is.NoErr(err) // new sender
				cfg := turnframe.DefaultDispatchConfig("w1")
				if tt.initial > 0 {
					cfg.InitialBackoff = tt.initial
				}
				if tt.maxBackoff > 0 {
					cfg.MaxBackoff = tt.maxBackoff
				}
				_, err = turnframe.NewDispatcher(store, sender, cfg).RunOnce(context.Background(), dispNow)
				is.NoErr(err) // run once
				rec := dispGet(t, store, rows[0].ID)
				is.Equal(rec.Status, tt.settled) // settled as the status says
				if tt.settled == turnframe.OutboxPending {
					is.Equal(rec.DueAt, dispNow.Add(tt.due)) // due after max(backoff, Retry-After), capped at MaxBackoff
				}
			})
		})
	}
}

func TestDispatcherWaitsForAnHTTPDate(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		rows := dispEnqueue(t, store, "acme", "k1", turnframe.OutboxMessage{Destination: "payments", Payload: []byte(`{"amount":100}`)})
		sender, err := turnframe.NewHTTPSender(map[string]string{"payments": retryAfterServer(t, 429, httpDateIn(30*time.Second))})
		is.NoErr(err) // new sender
		_, err = turnframe.NewDispatcher(store, sender, turnframe.DefaultDispatchConfig("w1")).RunOnce(context.Background(), dispNow)
		is.NoErr(err) // run once
		rec := dispGet(t, store, rows[0].ID)
		is.Equal(rec.Status, turnframe.OutboxPending)            // retried
		is.True(!rec.DueAt.After(dispNow.Add(30 * time.Second))) // not after the date, counted from the answer
		is.True(rec.DueAt.After(dispNow.Add(25 * time.Second)))  // nor much before it: the date governs, not the 1 s backoff
	})
}
