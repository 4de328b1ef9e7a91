package memstore_test

import (
	"testing"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/memstore"
	"github.com/turnframe/turnframe/storetest"
)

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) turnframe.Store {
		s := memstore.New()
		t.Cleanup(func() { s.Close() })
		return s
	})
}
