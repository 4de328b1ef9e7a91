package sqlitestore

import (
	"context"
)

// inTx runs f in one BEGIN IMMEDIATE transaction on the writer, writes the
// history records f queued (flushHistory) and commits, or rolls it all
// back (on an error or a panic) and returns the error wrapped for op. f
// must not call the writer pool: it has one connection, and f's
// transaction holds it.
func (s *Store) inTx(ctx context.Context, op string, f func(tx *wtx) error) error {
	done, err := s.enter(op)
	if err != nil {
		return err
	}
	defer done()
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return s.fail(ctx, op, err)
	}
	defer tx.Rollback()
	w := s.wrap(tx)
	if err := f(w); err != nil {
		return s.fail(ctx, op, err)
	}
	if err := w.flushHistory(ctx); err != nil {
		return s.fail(ctx, op, err)
	}
	if err := tx.Commit(); err != nil {
		return s.fail(ctx, op+": commit", err)
	}
	return nil
}
