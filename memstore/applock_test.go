package memstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/memstore"
)

// AppKeys and AppValue read the application's data under the store's lock:
// an application test that reads them while its Runtime commits (the race
// detector finds a read outside the lock).
func TestTheAppsDataIsReadUnderTheLock(t *testing.T) {
	is := is.New(t)
	s := memstore.New()
	t.Cleanup(func() { s.Close() })
	const n = 50
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer close(done)
		for i := range n {
			err := beginWith(s, func(_ context.Context, tx turnframe.Tx) error {
				a, _ := memstore.AppTxOf(tx)
				a.Put(fmt.Sprint("k", i), []byte("v"))
				return nil
			})
			if err != nil {
				t.Errorf("apply %d: %v", i, err)
			}
		}
	}()
	go func() {
		defer wg.Done()
		for { // reads for as long as the commits go on
			select {
			case <-done:
				return
			default:
			}
			if _, err := s.AppKeys(context.Background()); err != nil {
				t.Errorf("app keys: %v", err)
			}
			_, _ = s.AppValue(context.Background(), "k0")
		}
	}()
	wg.Wait()
	keys, err := s.AppKeys(context.Background())
	is.NoErr(err)          // app keys
	is.Equal(len(keys), n) // every commit's key
}
