package sqlitestore

import (
	"context"
)

// inTx runs f in one BEGIN IMMEDIATE transaction on the writer and commits
// it, or rolls it back (on an error or a panic) and returns the error
// wrapped for op. f must not call the writer pool: it has one connection,
// and f's transaction holds it.
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
	if err := f(s.wrap(tx)); err != nil {
		return s.fail(ctx, op, err)
	}
	if err := tx.Commit(); err != nil {
		return s.fail(ctx, op+": commit", err)
	}
	return nil
}
