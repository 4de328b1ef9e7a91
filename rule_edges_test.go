package turnframe_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/memstore"
)

// The rules below are ones the root package keeps and no test held it to:
// each was found by a mutant that every other test let live.

// A message id with a control character anywhere is ErrInvalid: at its
// first byte as much as in its middle.
func TestAMessageIDWithAControlCharacterAnywhereIsInvalid(t *testing.T) {
	for _, id := range []turnframe.MessageID{"\tm-1", "m\x01-1", "m-1\n", "\x7fm"} {
		t.Run(fmt.Sprintf("%q", id), func(t *testing.T) {
			is := is.New(t)
			err := id.Validate()
			is.True(errors.Is(err, turnframe.ErrInvalid)) // a control character in the id
		})
	}
}

// Approve and Deny move only an entry that awaits approval. An entry whose
// outcome is unknown, or that needs intervention, is ErrConflict and stays
// as it is: the store takes an approval's settlement of such an entry for a
// reconciliation (Approve's to Pending would be a blind resend, Deny's to
// Rejected would settle an effect that may have happened), so the Runtime's
// check of the status is what refuses it.
func TestApproveAndDenyRefuseAnEntryWhoseOutcomeIsUnknown(t *testing.T) {
	for _, approve := range []bool{true, false} {
		t.Run(fmt.Sprintf("approve=%v", approve), func(t *testing.T) {
			eachStore(t, func(t *testing.T, store turnframe.Store) {
				is := is.New(t)
				ctx := context.Background()
				rt := turnframe.New(store, turnframe.WithLogger(slog.New(slog.DiscardHandler)))
				turn := rtPlanned(t, rt, rtAccount, rtCmd("k-charge", "card/1", "charge"))
				_, err := rt.Execute(ctx, rtAccount, turn, rtNewHandler(func(context.Context, turnframe.Call, int) turnframe.Outcome {
					return turnframe.Unknown("ch_1")
				}))
				is.NoErr(err)                                                                   // execute
				is.Equal(rtEntry(t, store, "k-charge").Status, turnframe.JournalOutcomeUnknown) // the charge's outcome is unknown

				decide := rt.Deny
				if approve {
					decide = rt.Approve
				}
				_, err = decide(ctx, rtAccount, "k-charge", turnframe.ActorApp, "")
				is.True(errors.Is(err, turnframe.ErrConflict))                                  // not awaiting approval
				is.Equal(rtEntry(t, store, "k-charge").Status, turnframe.JournalOutcomeUnknown) // and still unknown
			})
		})
	}
}

// A late answer is recorded under a context of its own: the caller whose
// call timed out may have cancelled its context long before the late call
// returns, and the evidence is still written.
func TestALateAnswerIsRecordedAfterTheCallersContextEnded(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		row := dispEnqueue(t, store, rtAccount, "k1", turnframe.OutboxMessage{Destination: "payments"})[0]
		release := make(chan struct{})
		var once sync.Once
		t.Cleanup(func() { once.Do(func() { close(release) }) })
		sender := turnframe.SenderFunc(func(ctx context.Context, _ turnframe.OutboxEntry) turnframe.Dispatched {
			<-ctx.Done() // past its deadline…
			<-release    // …and after the caller gave up on everything, it answers
			return turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200", RemoteRef: "ch_late"}
		})
		signals := make(lateSignals, 1)
		d := turnframe.NewDispatcher(store, sender, turnframe.DispatchConfig{WorkerID: "w1", SendTimeout: 10 * time.Millisecond},
			turnframe.WithObserver(signals), turnframe.WithLogger(slog.New(slog.DiscardHandler)))
		ctx, cancel := context.WithCancel(context.Background())
		report, err := d.RunOnce(ctx, dispNow)
		is.NoErr(err)                                          // run once
		is.Equal(report.Unknown, []turnframe.OutboxID{row.ID}) // the deadline passed: unknown
		cancel()                                               // the caller is gone

		once.Do(func() { close(release) })
		is.Equal(<-signals, turnframe.Labels{Outcome: "recorded"})             // the late answer was written all the same
		ev := lateRecord(t, store, turnframe.OutboxSubject(rtAccount, row.ID)) // as evidence
		is.Equal(ev.RemoteRef, "ch_late")                                      // with what the remote said
	})
}

// A late answer the store refuses to record is counted as unrecorded, not
// as recorded: the signal says whether the evidence exists.
func TestALateAnswerTheStoreRefusesIsCountedUnrecorded(t *testing.T) {
	is := is.New(t)
	store := memstore.New()
	row := dispEnqueue(t, store, rtAccount, "k1", turnframe.OutboxMessage{Destination: "payments"})[0]
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	sender := turnframe.SenderFunc(func(ctx context.Context, _ turnframe.OutboxEntry) turnframe.Dispatched {
		<-ctx.Done()
		<-release
		return turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200"}
	})
	signals := make(lateSignals, 1)
	d := turnframe.NewDispatcher(store, sender, turnframe.DispatchConfig{WorkerID: "w1", SendTimeout: 10 * time.Millisecond},
		turnframe.WithObserver(signals), turnframe.WithLogger(slog.New(slog.DiscardHandler)))
	report, err := d.RunOnce(context.Background(), dispNow)
	is.NoErr(err)                                          // run once
	is.Equal(report.Unknown, []turnframe.OutboxID{row.ID}) // the deadline passed: unknown
	is.NoErr(store.Close())                                // the store is gone before the late answer

	once.Do(func() { close(release) })
	is.Equal(<-signals, turnframe.Labels{Outcome: "unrecorded"}) // the evidence could not be written, and the count says so
}

// The edges of the 2xx class: 299 is completed, 300 is not — a 3xx is an
// answer that says nothing of the effect.
func TestHTTPSenderClassifiesTheEdgesOf2xx(t *testing.T) {
	tests := []struct {
		status int
		want   turnframe.Dispatched
	}{
		{299, turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.299", RemoteRef: "req-1"}},
		{300, turnframe.Dispatched{Kind: turnframe.DispatchUnknown, Code: "http.300", RemoteRef: "req-1"}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			is := is.New(t)
			sender, err := turnframe.NewHTTPSender(map[string]string{"payments": dispStatusServer(t, tt.status)})
			is.NoErr(err)                                                                 // new sender
			is.Equal(sender.Send(context.Background(), dispEntry("acme", "k1")), tt.want) // classified
		})
	}
}

// failingTransport is a RoundTripper that reports to the request's trace
// what report does, and then fails without an answer.
type failingTransport func(trace *httptrace.ClientTrace)

func (f failingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	trace := httptrace.ContextClientTrace(req.Context())
	if trace == nil {
		return nil, errors.New("no trace on the request")
	}
	f(trace)
	return nil, errors.New("the connection broke")
}

// Retryable needs proof that nothing left: a transport that never reported
// asking for a connection proves nothing, and one that reported writing the
// request wrote it, whether or not it reported the connection first.
func TestHTTPSenderNeedsProofThatNothingLeftToRetry(t *testing.T) {
	tests := []struct {
		name   string
		report func(*httptrace.ClientTrace)
		want   turnframe.Dispatched
	}{
		{"NothingReportedIsUnknown", func(*httptrace.ClientTrace) {}, turnframe.Dispatched{Kind: turnframe.DispatchUnknown, Code: "http.no_response"}},
		{"AWrittenRequestIsUnknownEvenWithoutGotConn", func(tr *httptrace.ClientTrace) {
			tr.GetConn("remote:443")
			tr.WroteRequest(httptrace.WroteRequestInfo{})
		}, turnframe.Dispatched{Kind: turnframe.DispatchUnknown, Code: "http.no_response"}},
		{"AConnectionAskedForAndNeverGottenIsRetryable", func(tr *httptrace.ClientTrace) {
			tr.GetConn("remote:443")
		}, turnframe.Dispatched{Kind: turnframe.DispatchRetryable, Code: "http.connect"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			sender, err := turnframe.NewHTTPSender(map[string]string{"payments": "http://remote.example/pay"},
				turnframe.WithHTTPClient(&http.Client{Transport: failingTransport(tt.report)}))
			is.NoErr(err)                                                                 // new sender
			is.Equal(sender.Send(context.Background(), dispEntry("acme", "k1")), tt.want) // classified
		})
	}
}

// An answer's body is read at most httpDrainLimit (64 KiB) before it is
// closed: a remote that streams an endless body is cut off at once, not
// read for the whole body budget.
func TestHTTPSenderReadsAtMost64KiBOfABody(t *testing.T) {
	is := is.New(t)
	var written atomic.Int64
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(done)
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
		chunk := make([]byte, 32<<10)
		for {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return // the sender closed the connection
			}
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
		}
	}))
	t.Cleanup(srv.Close)
	sender, err := turnframe.NewHTTPSender(map[string]string{"payments": srv.URL})
	is.NoErr(err) // new sender
	got := sender.Send(context.Background(), dispEntry("acme", "k1"))
	is.Equal(got.Kind, turnframe.DispatchCompleted) // completed on the status line
	<-done
	is.True(written.Load() < 32<<20) // the sender stopped reading after 64 KiB (and the socket buffers), not after its budget
}

// An empty payload is an empty payload whether the store hands it over as
// nil or as a non-nil empty slice (a driver may read an empty column so): it
// goes out with Content-Length: 0, never chunked, which strict remotes
// refuse (411).
func TestHTTPSenderSendsANonNilEmptyPayloadWithContentLengthZero(t *testing.T) {
	is := is.New(t)
	type seen struct {
		length           int64
		transferEncoding []string
	}
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		got <- seen{r.ContentLength, r.TransferEncoding}
		if r.ContentLength != 0 || len(r.TransferEncoding) != 0 {
			w.WriteHeader(http.StatusLengthRequired) // as a strict remote does
		}
	}))
	t.Cleanup(srv.Close)
	sender, err := turnframe.NewHTTPSender(map[string]string{"payments": srv.URL})
	is.NoErr(err) // new sender
	entry := dispEntry("acme", "k1")
	entry.Payload = []byte{}
	out := sender.Send(context.Background(), entry)
	req := <-got
	is.Equal(req.length, int64(0))                                                           // Content-Length: 0
	is.Equal(len(req.transferEncoding), 0)                                                   // not chunked
	is.Equal(out, turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200"}) // completed
}

// DEL is a control character too: a content type holding it cannot be a
// header value, and NewHTTPSender refuses it rather than make every send
// fail unanswered.
func TestNewHTTPSenderRefusesAContentTypeWithDEL(t *testing.T) {
	is := is.New(t)
	_, err := turnframe.NewHTTPSender(map[string]string{"payments": "http://remote.example/pay"}, turnframe.WithContentType("text/plain\x7f"))
	is.True(errors.Is(err, turnframe.ErrInvalid)) // DEL cannot travel in a header value
}

// A dial that fails before it tries an address — here an address whose
// zone names no network interface (a port out of range was the first such
// dial; NewHTTPSender refuses that now) — is reported by no httptrace hook; the default client's own dialer
// records it, so the send is "http.dial", not a connection that failed for
// no known reason.
func TestHTTPSenderCountsADialThatFailedBeforeTryingAnAddressAsADialFailure(t *testing.T) {
	is := is.New(t)
	sender, err := turnframe.NewHTTPSender(map[string]string{"payments": "http://[fe80::1%25nosuchif0]:80/pay"})
	is.NoErr(err) // new sender
	got := sender.Send(context.Background(), dispEntry("acme", "k1"))
	is.Equal(got, turnframe.Dispatched{Kind: turnframe.DispatchRetryable, Code: "http.dial"}) // nothing left: the dial failed
}

// The default client opens a fresh connection for every send: a request
// written on a pooled connection the server had just closed could not be
// told from one it received.
func TestHTTPSenderDefaultClientOpensAConnectionPerSend(t *testing.T) {
	is := is.New(t)
	var opened atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	sender, err := turnframe.NewHTTPSender(map[string]string{"payments": srv.URL})
	is.NoErr(err) // new sender
	for i := range 3 {
		got := sender.Send(context.Background(), dispEntry("acme", turnframe.IdempotencyKey(fmt.Sprint("k", i))))
		is.Equal(got.Kind, turnframe.DispatchCompleted) // sent
	}
	is.Equal(opened.Load(), int32(3)) // three sends, three connections: none reused
}

// executeOutcome runs one command keyed key on a fresh turn under ctx, its
// handler answering out, and returns the rows it enqueued as stored.
func executeOutcome(t *testing.T, ctx context.Context, rt *turnframe.Runtime, store turnframe.Store, key turnframe.IdempotencyKey, out turnframe.Outcome) []turnframe.OutboxRecord {
	t.Helper()
	turn := rtPlanned(t, rt, rtAccount, rtCmd(key, "order/7", "pay"))
	report, err := rt.Execute(ctx, rtAccount, turn, turnframe.HandlerFunc(func(context.Context, turnframe.Call) turnframe.Outcome { return out }))
	if err != nil {
		t.Fatalf("execute: %v", err)
	}
	return storedRows(t, ctx, store, report.Results[0].OutboxIDs)
}

// WithTraceContext stamps the rows, never the handler's Outcome: an Outcome
// a handler builds once and answers every call with carries no request's
// trace into the next request's rows, and one whose trace context no store
// keeps still holds it after Execute dropped it from the rows.
func TestWithTraceContextLeavesTheHandlersOutcomeAsItWasBuilt(t *testing.T) {
	t.Run("AReusedOutcomeGetsEachRequestsTrace", func(t *testing.T) {
		is := is.New(t)
		store := memstore.New()
		t.Cleanup(func() { store.Close() })
		rt := turnframe.New(store, turnframe.WithTraceContext(fromRequest), turnframe.WithLogger(slog.New(slog.DiscardHandler)))
		reused := turnframe.Commit(nil, turnframe.OutboxMessage{Destination: "payments"})

		first := executeOutcome(t, context.WithValue(context.Background(), requestKey{}, "trace-1"), rt, store, "k-1", reused)
		is.Equal(first[0].TraceContext, "trace-1")    // the first request's trace
		is.Equal(reused.Outbox()[0].TraceContext, "") // the outcome as the handler built it
		second := executeOutcome(t, context.WithValue(context.Background(), requestKey{}, "trace-2"), rt, store, "k-2", reused)
		is.Equal(second[0].TraceContext, "trace-2") // the second request's trace, not the first's
	})
	t.Run("ADroppedTraceContextIsDroppedFromTheRowsOnly", func(t *testing.T) {
		is := is.New(t)
		store := memstore.New()
		t.Cleanup(func() { store.Close() })
		rt := turnframe.New(store, turnframe.WithTraceContext(fromRequest), turnframe.WithLogger(slog.New(slog.DiscardHandler)))
		long := strings.Repeat("x", turnframe.MaxTraceContextLen+1)
		out := turnframe.Commit(nil, turnframe.OutboxMessage{Destination: "payments", TraceContext: long})

		rows := executeOutcome(t, context.WithValue(context.Background(), requestKey{}, "trace-1"), rt, store, "k-1", out)
		is.Equal(rows[0].TraceContext, "trace-1")     // the handler's refused value dropped, the request's put in
		is.True(out.Outbox()[0].TraceContext == long) // the outcome as the handler built it
	})
}

// TestLimitsEachOfItsOwn runs TestLimits' table under limits that all
// differ, so that an input checked against another field's limit — an
// event's data against Limits.Payload, say — is caught: under equal limits
// it would pass for its own.
func TestLimitsEachOfItsOwn(t *testing.T) {
	limits := turnframe.Limits{Text: 11, Payload: 12, EventData: 13, Commands: 4, Events: 5, Messages: 6, Cases: 7, Questions: 8}
	for _, in := range limitInputs() {
		t.Run(in.field, func(t *testing.T) {
			store := memstore.New()
			t.Cleanup(func() { store.Close() })
			limit := in.of(newLimitFixture(t, store, limits).rt.Limits())
			t.Run("AtTheLimitIsAccepted", func(t *testing.T) {
				is := is.New(t)
				f := newLimitFixture(t, store, limits)
				is.NoErr(in.give(f, limit)) // an input at its own limit
				in.want(t, f, limit)
			})
			t.Run("OneOverIsInvalidAndWritesNothing", func(t *testing.T) {
				is := is.New(t)
				f := newLimitFixture(t, store, limits)
				err := in.give(f, limit+1)
				is.True(errors.Is(err, turnframe.ErrInvalid)) // one over its own limit is ErrInvalid
				is.True(!in.held(f))                          // nothing of it written
			})
		})
	}
}

// A NUL byte is refused in every string a store keeps as text, at its first
// byte as anywhere else (PostgreSQL's text cannot hold one).
func TestANULAtTheFirstByteIsInvalid(t *testing.T) {
	checks := map[string]error{
		"account":     turnframe.AccountID("\x00acme").Validate(),
		"case":        turnframe.CaseKey("\x00order/7").Validate(),
		"worker":      turnframe.CheckWorker("\x00w1"),
		"code":        turnframe.CheckCode("code", "\x00declined"),
		"text":        turnframe.CheckText("\x00hello"),
		"name":        turnframe.Command{Key: "k", Case: "c", Name: "\x00pay"}.Validate(),
		"destination": turnframe.OutboxMessage{Destination: "\x00payments"}.Validate(),
	}
	for field, err := range checks {
		t.Run(field, func(t *testing.T) {
			is := is.New(t)
			is.True(errors.Is(err, turnframe.ErrInvalid)) // a NUL byte first
		})
	}
}

// Every edge of a bounded enum or count is checked, not only far beyond it:
// the first status past the last outbox status is no status, and a claim's
// attempt number starts at 1.
func TestTheFirstValuePastABoundIsInvalid(t *testing.T) {
	gen := turnframe.NewIDGenerator()
	claim := turnframe.Claim{OutboxEntry: turnframe.OutboxEntry{ID: gen.OutboxID(dispNow), Attempts: 0}, Worker: "w1"}
	checks := map[string]error{
		"filter.status":             turnframe.OutboxFilter{Status: turnframe.OutboxNeedsIntervention + 1, Limit: 10}.Validate(),
		"settlement.claim.attempts": turnframe.OutboxSettlement{Claim: claim, To: turnframe.OutboxCompleted, Now: dispNow}.Validate(),
		"extend.claims[0].attempts": turnframe.CheckExtend([]turnframe.Claim{claim}, dispNow, time.Minute),
	}
	for name, err := range checks {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			is.True(errors.Is(err, turnframe.ErrInvalid)) // one past the bound is refused before any transaction
		})
	}
}

// Write.Validate and Resolution.Validate refuse, before any transaction,
// what no store keeps, whoever wrote the Write: a Begin's text is held to
// the store's ceiling (UTF-8, no NUL, at most MaxTextLen), a settlement's
// remote reference to MaxRemoteRefLen, and a resolution's attempt fence is
// never negative.
func TestValidateRefusesWhatNoStoreKeeps(t *testing.T) {
	gen := turnframe.NewIDGenerator()
	turn := gen.TurnID(dispNow)
	begin := func(text string) turnframe.Write {
		return turnframe.Write{Account: "acme", Turn: turn, Now: dispNow,
			Begin: &turnframe.StoredTurn{Account: "acme", ID: turn, Conversation: gen.ConversationID(dispNow), Text: text}}
	}
	settle := turnframe.Write{Account: "acme", Turn: turn, Now: dispNow, Settle: []turnframe.Settlement{{
		Key: "k", To: turnframe.JournalCommitted, RemoteRef: strings.Repeat("r", turnframe.MaxRemoteRefLen+1)}}}
	checks := map[string]error{
		"begin.text over MaxTextLen":    begin(strings.Repeat("x", turnframe.MaxTextLen+1)).Validate(),
		"begin.text not UTF-8":          begin("\xff").Validate(),
		"begin.text with a NUL":         begin("hi\x00").Validate(),
		"settle[0].remote_ref too long": settle.Validate(),
		"resolution.attempts negative":  turnframe.Resolution{ID: gen.OutboxID(dispNow), Verdict: turnframe.VerdictCompleted, Attempts: -1, Now: dispNow}.Validate(),
	}
	for name, err := range checks {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			is.True(errors.Is(err, turnframe.ErrInvalid)) // refused before any transaction
		})
	}
	t.Run("NothingIsWritten", func(t *testing.T) {
		is := is.New(t)
		store := memstore.New()
		t.Cleanup(func() { store.Close() })
		_, err := store.Apply(context.Background(), begin("hi\x00"))
		is.True(errors.Is(err, turnframe.ErrInvalid)) // the store refuses the Write
		_, err = store.LoadTurn(context.Background(), "acme", turn)
		is.True(errors.Is(err, turnframe.ErrNotFound)) // and began no turn
	})
}

// A note over MaxNoteLen is ErrInvalid before anything is read: a decision
// with a bad note is a bad input whatever the key names (here a key never
// used, which would otherwise be ErrNotFound).
func TestApproveChecksItsNoteBeforeReadingTheEntry(t *testing.T) {
	is := is.New(t)
	store := memstore.New()
	t.Cleanup(func() { store.Close() })
	rt := turnframe.New(store, turnframe.WithLogger(slog.New(slog.DiscardHandler)))
	long := strings.Repeat("n", turnframe.MaxNoteLen+1)
	_, err := rt.Approve(context.Background(), rtAccount, "never-used", turnframe.ActorApp, long)
	is.True(errors.Is(err, turnframe.ErrInvalid)) // the note is refused as input
	_, err = rt.Deny(context.Background(), rtAccount, "never-used", turnframe.ActorApp, long)
	is.True(errors.Is(err, turnframe.ErrInvalid)) // by Deny too
}

// A send not started because its sweep stopped gives back the destination's
// place it found free: a Dispatcher's limits outlive the sweep, and a place
// taken and never given back would starve the destination for the
// Dispatcher's life. Each row after the stop finds the one place free and
// the stop ended at once, the case where acquire must give the place back.
func TestAStoppedSendGivesBackItsDestinationsPlace(t *testing.T) {
	is := is.New(t)
	store := memstore.New()
	t.Cleanup(func() { store.Close() })
	const rows = 20
	for i := range rows {
		dispEnqueue(t, store, rtAccount, turnframe.IdempotencyKey(fmt.Sprint("k", i)), turnframe.OutboxMessage{Destination: "payments"})
	}
	ctx, cancel := context.WithCancel(context.Background())
	var sent atomic.Int32
	sender := turnframe.SenderFunc(func(context.Context, turnframe.OutboxEntry) turnframe.Dispatched {
		if sent.Add(1) == 1 { // one send at a time: Concurrency 1
			cancel() // the caller stops the sweep during its first send
		}
		return turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200"}
	})
	d := turnframe.NewDispatcher(store, sender, turnframe.DispatchConfig{
		WorkerID: "w1", Concurrency: 1, BatchSize: rows, DestinationLimits: map[string]int{"payments": 1},
	}, turnframe.WithLogger(slog.New(slog.DiscardHandler)))
	report, err := d.RunOnce(ctx, dispNow)
	is.NoErr(err)                         // the stopped sweep
	is.Equal(len(report.Retried), rows-1) // the sends after the stop not started: their rows pending again

	// The next sweep sends them all; a place lost by the stopped one would
	// keep every send waiting until this bound ends.
	bound, end := context.WithTimeout(context.Background(), 30*time.Second)
	defer end()
	report, err = d.RunOnce(bound, dispNow.Add(time.Second))
	is.NoErr(err)                           // the next sweep
	is.Equal(len(report.Completed), rows-1) // every row sent: the destination kept its place
}

// An empty content type or remote-reference header name keeps the default,
// as documented: it does not send an empty Content-Type nor read the
// reference from no header.
func TestHTTPSenderEmptyOptionsKeepTheDefaults(t *testing.T) {
	is := is.New(t)
	contentType := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		contentType <- r.Header.Get("Content-Type")
		w.Header().Set("X-Request-Id", "req-1")
	}))
	t.Cleanup(srv.Close)
	sender, err := turnframe.NewHTTPSender(map[string]string{"payments": srv.URL},
		turnframe.WithContentType(""), turnframe.WithRemoteRefHeader(""))
	is.NoErr(err) // new sender
	got := sender.Send(context.Background(), dispEntry("acme", "k1"))
	is.Equal(got, turnframe.Dispatched{Kind: turnframe.DispatchCompleted, Code: "http.200", RemoteRef: "req-1"}) // the reference from X-Request-Id
	is.Equal(<-contentType, turnframe.DefaultHTTPContentType)                                                    // the default content type
}
