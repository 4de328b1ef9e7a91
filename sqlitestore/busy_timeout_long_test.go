package sqlitestore_test

import (
	"context"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe/sqlitestore"
)

// WithBusyTimeout "sets how long a write waits for the file's write lock
// while another connection holds it ... rounded down to the millisecond".
// A long wait — a month, or math.MaxInt64 for "as long as it takes", the
// way WithCommandTimeout takes it — overflowed SQLite's 32-bit busy_timeout
// and became no wait at all: every write that met another writer was
// ErrBusy at once.
func TestALongBusyTimeoutIsNeverNoWait(t *testing.T) {
	for name, d := range map[string]time.Duration{
		"ThirtyDays": 30 * 24 * time.Hour,
		"MaxInt64":   time.Duration(math.MaxInt64),
	} {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			s, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "turnframe.db"), sqlitestore.WithBusyTimeout(d))
			is.NoErr(err)
			defer s.Close()
			var ms int64
			is.NoErr(s.ReadDB().QueryRowContext(context.Background(), "PRAGMA busy_timeout").Scan(&ms))
			t.Logf("busy_timeout in force: %d ms", ms)
			is.True(ms >= (5 * time.Second).Milliseconds()) // at least the default wait, never none
		})
	}
}

// TestAOneMillisecondBusyTimeoutIsKept: WithBusyTimeout keeps the default
// only for a d under one millisecond; one millisecond itself is a wait of
// one millisecond.
func TestAOneMillisecondBusyTimeoutIsKept(t *testing.T) {
	is := is.New(t)
	s, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "turnframe.db"), sqlitestore.WithBusyTimeout(time.Millisecond))
	is.NoErr(err)
	defer s.Close()
	var ms int64
	is.NoErr(s.ReadDB().QueryRowContext(context.Background(), "PRAGMA busy_timeout").Scan(&ms))
	is.Equal(ms, int64(1)) // the millisecond asked for, not the default
}
