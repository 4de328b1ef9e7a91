package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// traceparent is a W3C traceparent, as otelturnframe.TraceContext writes
// one; to a store it is text like any other.
const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// testTraceContext: a row's trace context is written with the row and read
// back unchanged by every read and every claim, through a retry too; a row
// enqueued without one has none. The longest value taken counts bytes, not
// characters.
func testTraceContext(t *testing.T, e *env) {
	is := is.New(t)
	longest := strings.Repeat("é", turnframe.MaxTraceContextLen/2) // 512 bytes, 256 characters
	with, none, long := message(""), message(""), message("")
	with.TraceContext = traceparent + ";vendor=a1"
	long.TraceContext = longest
	want := []string{with.TraceContext, "", longest}
	rows := e.enqueue(acme, at(0), with, none, long)
	is.Equal(len(rows), 3) // three rows
	for i, r := range rows {
		is.Equal(r.TraceContext, want[i])           // Apply reports it
		is.Equal(e.row(r.ID).TraceContext, want[i]) // GetOutbox reads it back
	}
	listed, err := e.s.ListOutbox(e.ctx, turnframe.OutboxFilter{Account: acme, Limit: 10})
	is.NoErr(err)
	is.Equal(len(listed), 3) // every row listed
	for i, r := range listed {
		is.Equal(r.TraceContext, want[i]) // ListOutbox reads it back
	}
	claims := e.claim(at(time.Second), 10, worker)
	is.Equal(len(claims), 3) // every row claimed
	for i, c := range claims {
		is.Equal(c.ID, rows[i].ID)        // in enqueue order
		is.Equal(c.TraceContext, want[i]) // the Sender gets it with the claim
	}
	e.must(turnframe.RetryClaim(e.ctx, e.s, claims[0], "busy", at(2*time.Second)), "retry")
	again := e.claimOne(at(3*time.Second), worker)
	is.Equal(again.ID, rows[0].ID)          // claimed again
	is.Equal(again.TraceContext, want[0])   // a retry keeps it
	is.Equal(e.row(rows[0].ID).Attempts, 2) // the second attempt
}
