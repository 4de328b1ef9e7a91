package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/memstore"
	"github.com/turnframe/turnframe/storetest"
)

var _ storetest.AppStore = appStore{}

// appStore is a memstore as the conformance suite's App subtests use it:
// the application's rows are the AppTx key/value area.
type appStore struct{ *memstore.Store }

func (s appStore) PutAppRow(_ context.Context, tx turnframe.Tx, key, value string) error {
	a, ok := memstore.AppTxOf(tx)
	if !ok {
		return fmt.Errorf("not a memstore transaction: %T", tx)
	}
	a.Put(key, []byte(value))
	return nil
}

func (s appStore) AppRows(ctx context.Context) (map[string]string, error) {
	keys, err := s.AppKeys(ctx)
	if err != nil {
		return nil, err
	}
	rows := make(map[string]string, len(keys))
	for _, k := range keys {
		v, err := s.AppValue(ctx, k)
		if err != nil {
			return nil, err
		}
		rows[k] = string(v)
	}
	return rows, nil
}

// beginWith applies a Write that begins a new turn with app as its App.
func beginWith(s *memstore.Store, app turnframe.AppWrites) error {
	ids := turnframe.NewIDGenerator()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	turn := ids.TurnID(now)
	_, err := s.Apply(context.Background(), turnframe.Write{
		Account: "acme", Turn: turn, Now: now, App: app,
		Begin: &turnframe.StoredTurn{Account: "acme", ID: turn, Conversation: ids.ConversationID(now), Text: "hi"},
	})
	return err
}

func TestAppTx(t *testing.T) {
	errApp := errors.New("app failed")
	tests := []struct {
		name string
		app  func(a *memstore.AppTx) error // the second Write's App; the first put a=1, b=2
		err  error
		want map[string]string
	}{
		{"PutAndDeleteAreStoredWithTheWrite", func(a *memstore.AppTx) error {
			a.Put("c", []byte("3"))
			a.Delete("b")
			return nil
		}, nil, map[string]string{"a": "1", "c": "3"}},
		{"AnErrorDiscardsWhatWasStaged", func(a *memstore.AppTx) error {
			a.Put("a", []byte("changed"))
			a.Delete("b")
			return errApp
		}, errApp, map[string]string{"a": "1", "b": "2"}},
		{"GetSeesTheCommittedValueThenTheStagedOne", func(a *memstore.AppTx) error {
			v, _ := a.Get("a")
			a.Put("a", append(v, '+'))
			if w, _ := a.Get("a"); string(w) != "1+" {
				return fmt.Errorf("read back %q after putting 1+", w)
			}
			return nil
		}, nil, map[string]string{"a": "1+", "b": "2"}},
		{"GetOfADeletedKeyIsAbsent", func(a *memstore.AppTx) error {
			a.Delete("a")
			if _, ok := a.Get("a"); ok {
				return errors.New("a deleted key read back")
			}
			return nil
		}, nil, map[string]string{"b": "2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			ctx := context.Background()
			s := memstore.New()
			defer s.Close()
			err := beginWith(s, func(_ context.Context, tx turnframe.Tx) error {
				a, ok := memstore.AppTxOf(tx)
				is.True(ok)                     // a memstore Tx
				is.Equal(a.Backend(), "memory") // named so
				a.Put("a", []byte("1"))
				a.Put("b", []byte("2"))
				return nil
			})
			is.NoErr(err) // the first Write
			err = beginWith(s, func(_ context.Context, tx turnframe.Tx) error {
				a, _ := memstore.AppTxOf(tx)
				return tc.app(a)
			})
			if tc.err != nil {
				is.True(errors.Is(err, turnframe.ErrAppWrite)) // the app's writes failed
				is.True(errors.Is(err, tc.err))                // with its own error
			} else {
				is.NoErr(err) // the second Write
			}
			got := appStore{s}
			rows, err := got.AppRows(ctx)
			is.NoErr(err)           // app rows
			is.Equal(rows, tc.want) // as committed
		})
	}
}

func TestAppTxAfterItsCallPanics(t *testing.T) {
	is := is.New(t)
	s := memstore.New()
	defer s.Close()
	var kept *memstore.AppTx
	is.NoErr(beginWith(s, func(_ context.Context, tx turnframe.Tx) error {
		kept, _ = memstore.AppTxOf(tx)
		return nil
	})) // a Write
	defer func() {
		is.True(recover() != nil) // a programming error
	}()
	kept.Put("late", nil)
}

func TestAppReadsAfterClose(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s := memstore.New()
	_, err := s.AppValue(ctx, "missing")
	is.True(errors.Is(err, turnframe.ErrNotFound)) // no such key
	is.NoErr(s.Close())
	_, err = s.AppKeys(ctx)
	is.True(errors.Is(err, turnframe.ErrClosed)) // keys after Close
	_, err = s.AppValue(ctx, "missing")
	is.True(errors.Is(err, turnframe.ErrClosed)) // a value after Close
}
