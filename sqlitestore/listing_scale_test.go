package sqlitestore_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// readBytes is the bytes this process has read through read(2) so far
// (/proc/self/io rchar): the store's connections read the file that way.
func readBytes(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Skip("no /proc/self/io:", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "rchar: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no rchar in /proc/self/io")
	return 0
}

// Dispatcher.Run's release (every PollInterval) and every Recover list the
// OutcomeUnknown rows, and Recover the NeedsIntervention ones. DESIGN
// promises that a claim's cost does not grow with finished rows, and this
// listing runs beside every claim: it reads its status's partial index
// (outbox_unknown, outbox_intervention), never the finished rows. The file
// holds 12.5 MiB of finished payloads, more than a connection's page
// cache, so a listing that read them would read the file.
func TestListingUncertainRowsDoesNotReadTheFinishedRows(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t)
	finishedRows(t, s, 100, 128<<10, at(t0.Add(3*time.Second)))
	for _, st := range []turnframe.OutboxStatus{turnframe.OutboxOutcomeUnknown, turnframe.OutboxNeedsIntervention} {
		t.Run(st.String(), func(t *testing.T) {
			is := is.New(t)
			before := readBytes(t)
			rows, err := s.ListOutbox(ctx, turnframe.OutboxFilter{Status: st, Limit: 256})
			read := readBytes(t) - before
			is.NoErr(err)
			is.Equal(len(rows), 0) // no such row
			t.Logf("listing read %d KiB", read>>10)
			is.True(read < 128<<10) // less than one finished row's payload, not the 12.5 MiB of them
		})
	}
}
