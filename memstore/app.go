package memstore

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/turnframe/turnframe"
)

var _ turnframe.Tx = (*AppTx)(nil)

// AppTx is the application's own data in one memstore Apply: the Tx a
// Write's App function is handed (turnframe.Write.App, Outcome.With). It is
// a key/value area, the memstore's stand-in for an app's tables, so that
// application tests can write their domain rows in the commit as they would
// on sqlitestore's *sql.Tx. What an App function puts is staged: it is
// stored when the Write commits, and discarded with the rest of the Write
// when the function returns an error. Read committed values with
// Store.AppValue and Store.AppKeys.
//
// An AppTx is valid only during the App call it was handed to; it is not
// safe for concurrent use (the call holds the store's lock). Values go in
// and come out as copies.
type AppTx struct {
	s      *Store
	staged map[string][]byte // nil value: deleted
	done   bool
}

// AppTxOf returns the memstore AppTx that tx is, for an App function that
// runs on memstore; false for a Tx of another store.
func AppTxOf(tx turnframe.Tx) (*AppTx, bool) {
	a, ok := tx.(*AppTx)
	return a, ok
}

// Backend returns "memory".
func (t *AppTx) Backend() string { return "memory" }

// Get returns the value of key as this Write sees it: staged by it, or
// else committed before it; false if there is none.
func (t *AppTx) Get(key string) ([]byte, bool) {
	t.live()
	if v, ok := t.staged[key]; ok {
		return bytes.Clone(v), v != nil
	}
	v, ok := t.s.app[key]
	return bytes.Clone(v), ok
}

// Put stages key = value (an empty value is stored as empty, not absent).
func (t *AppTx) Put(key string, value []byte) {
	t.live()
	if value == nil {
		value = []byte{}
	}
	t.staged[key] = bytes.Clone(value)
}

// Delete stages the removal of key.
func (t *AppTx) Delete(key string) {
	t.live()
	t.staged[key] = nil
}

// live panics on a use after the App call: a programming error.
func (t *AppTx) live() {
	if t.done {
		panic("memstore: AppTx used after its App call returned")
	}
}

// runApp calls w.App, if any, with a fresh AppTx, while s.mu is held and
// after the Write was built. It returns what to store when the Write
// commits (nil for nothing), or the App's error wrapping
// turnframe.ErrAppWrite.
func (s *Store) runApp(ctx context.Context, w turnframe.Write) (map[string][]byte, error) {
	if w.App == nil {
		return nil, nil
	}
	t := &AppTx{s: s, staged: make(map[string][]byte)}
	defer func() { t.done = true }()
	if err := w.App(ctx, t); err != nil {
		return nil, fmt.Errorf("%w: %w", turnframe.ErrAppWrite, err)
	}
	return t.staged, nil
}

// commitApp stores what runApp staged, with s.mu held.
func (s *Store) commitApp(staged map[string][]byte) {
	if len(staged) == 0 {
		return
	}
	if s.app == nil {
		s.app = make(map[string][]byte)
	}
	for k, v := range staged {
		if v == nil {
			delete(s.app, k)
		} else {
			s.app[k] = v
		}
	}
}

// AppValue returns the committed value of the application's key (AppTx),
// as a copy: ErrNotFound if no committed Write put it, ErrClosed after
// Close.
func (s *Store) AppValue(ctx context.Context, key string) ([]byte, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	v, ok := s.app[key]
	if !ok {
		return nil, fmt.Errorf("memstore: app value %q: %w", key, turnframe.ErrNotFound)
	}
	return bytes.Clone(v), nil
}

// AppKeys returns the application's committed keys (AppTx), sorted; none
// for a store no App wrote to. ErrClosed after Close.
func (s *Store) AppKeys(ctx context.Context) ([]string, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.app)), nil
}
