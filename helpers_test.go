package turnframe_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/memstore"
	"github.com/turnframe/turnframe/sqlitestore"
)

// eachStore runs f as one subtest per store implementation, each with a fresh
// store: the root package's tests prove the runtime, dispatcher and recovery
// over both stores without copying a test.
func eachStore(t *testing.T, f func(t *testing.T, store turnframe.Store)) {
	t.Helper()
	t.Run("memstore", func(t *testing.T) {
		store := memstore.New()
		t.Cleanup(func() { store.Close() })
		f(t, store)
	})
	t.Run("sqlitestore", func(t *testing.T) {
		store, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "turnframe.db"))
		if err != nil {
			t.Fatalf("open sqlitestore: %v", err)
		}
		t.Cleanup(func() { store.Close() })
		f(t, store)
	})
}

// recorder is an Observer that keeps every signal it is given, in order.
type recorder struct {
	mu      sync.Mutex
	signals []recorded
}

type recorded struct {
	signal turnframe.Signal
	labels turnframe.Labels
}

func (r *recorder) Observe(s turnframe.Signal, l turnframe.Labels, _ time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.signals = append(r.signals, recorded{s, l})
}

// labels returns the labels of every s observed, in order.
func (r *recorder) labels(s turnframe.Signal) []turnframe.Labels {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []turnframe.Labels
	for _, sig := range r.signals {
		if sig.signal == s {
			out = append(out, sig.labels)
		}
	}
	return out
}

// count returns how often s was observed.
func (r *recorder) count(s turnframe.Signal) int { return len(r.labels(s)) }
