package faulttest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// legacyKeyCalls address an admitted command by a key no command is
// admitted under today but a release at schema 1 admitted (badKeys less
// storedBadKeys). No entry holds one here, so each is ErrNotFound.
func legacyKeyCalls(key turnframe.IdempotencyKey) []call {
	return []call{
		{name: "Store.ByKey", do: func(ctx context.Context, f *fixture) error {
			_, err := f.store.ByKey(ctx, f.account, key)
			return err
		}},
		{name: "Store.Apply/Settle", do: func(ctx context.Context, f *fixture) error {
			_, err := f.store.Apply(ctx, turnframe.Write{Account: f.account, Turn: f.unknownTurn, Now: t0,
				Settle: []turnframe.Settlement{{Key: key, To: turnframe.JournalCommitted}}})
			return err
		}},
		{name: "Recovery.Settle", do: func(ctx context.Context, f *fixture) error {
			return turnframe.NewRecovery(f.store).Settle(ctx, turnframe.JournalSubject(f.account, key), turnframe.Decision{Verdict: turnframe.VerdictCompleted})
		}},
		{name: "Runtime.Approve", do: func(ctx context.Context, f *fixture) error {
			_, err := turnframe.New(f.store).Approve(ctx, f.account, key, turnframe.ActorOperator, "")
			return err
		}},
	}
}

// TestALegacyKeyNoEntryHoldsIsNotFound: the calls that address an admitted
// command take the keys an earlier release admitted, so a file it wrote
// keeps every command movable; a key no entry holds is ErrNotFound, never
// a panic, and nothing is written.
func TestALegacyKeyNoEntryHoldsIsNotFound(t *testing.T) {
	stored := map[string]bool{}
	for _, bk := range storedBadKeys {
		stored[bk.name] = true
	}
	for _, o := range openers {
		t.Run(o.name, func(t *testing.T) {
			f := newFixture(t, o)
			before, dump := fileState(t, f.path), dumpStore(t, f)
			for _, bk := range badKeys {
				if stored[bk.name] {
					continue
				}
				for _, c := range legacyKeyCalls(bk.key) {
					t.Run(c.name+"/"+bk.name, func(t *testing.T) {
						is := is.New(t)
						err := safely(func() error { return c.do(bg, f) })
						is.True(errors.Is(err, turnframe.ErrNotFound)) // addressed, and no entry holds it
					})
				}
			}
			is := is.New(t)
			is.Equal(dumpStore(t, f), dump) // nothing changed
			if f.path != "" {
				is.Equal(fileState(t, f.path), before) // the file as it was
			}
		})
	}
}
