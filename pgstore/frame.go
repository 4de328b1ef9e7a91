package pgstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/turnframe/turnframe"
)

// frame moves the times of one call between the caller's clock and the
// store's. In DatabaseClock mode off is the database's clock_timestamp()
// less the caller's now, read once at the start of the call (for a Write
// that is not a Begin, statement_timestamp() of the statement that locks
// its turn, the Write's first: lockTurnSQL): in moves a
// time the caller gave into the database's frame, out moves a time read
// from the database back into the caller's. In CallerClock mode off is zero
// and both are the identity. Within one call in(out(t)) is t exactly: off
// is whole microseconds, as the stored times are.
type frame struct{ off time.Duration }

// clockNowSQL reads the database's clock: the time now, not the start of
// the transaction (now()), so a frame read inside a long transaction is
// current.
const clockNowSQL = `SELECT clock_timestamp()`

// frameAt returns the frame of a call whose caller's time is callerNow, read
// through q (the pool, or the caller's transaction). A zero callerNow (bad
// input, which the call refuses) gives the identity frame, as does
// CallerClock mode; neither reads the database.
func (s *Store) frameAt(ctx context.Context, q querier, op string, callerNow time.Time) (frame, error) {
	if s.clock != DatabaseClock || callerNow.IsZero() {
		return frame{}, nil
	}
	done, err := s.enter(op)
	if err != nil {
		return frame{}, err
	}
	defer done()
	var db time.Time
	if err := s.readClock(ctx, q, &db); err != nil {
		return frame{}, s.fail(ctx, op+": read the database clock", err)
	}
	return frameOf(db, callerNow), nil
}

// readClock reads the database's clock through q. On the pool it holds the
// connection, so that one the server dropped (nothing was written: the
// call's transaction has not begun) is errConnLost, ErrBusy, as in runTx.
func (s *Store) readClock(ctx context.Context, q querier, db *time.Time) error {
	p, ok := q.(*pgxpool.Pool)
	if !ok {
		return q.QueryRow(ctx, clockNowSQL).Scan(db)
	}
	c, err := p.Acquire(ctx)
	if err != nil {
		return acquireLost(ctx, err)
	}
	defer c.Release()
	return connLost(ctx, c.Conn(), c.QueryRow(ctx, clockNowSQL).Scan(db))
}

// frameOf returns the frame of a call whose caller's time is callerNow,
// the database's clock reading db.
func frameOf(db, callerNow time.Time) frame {
	return frame{off: db.Sub(callerNow).Truncate(time.Microsecond)}
}

// frame is frameAt for a call that carries no time of its own (a read, a
// Requeue, a Prune): the caller's time is the host clock (WithHostClock).
func (s *Store) frame(ctx context.Context, op string) (frame, error) {
	if s.clock != DatabaseClock {
		return frame{}, nil
	}
	return s.frameAt(ctx, s.pool, op, s.hostNow())
}

// in moves t into the database's frame. A zero time stays zero, and a time
// outside the range the stores keep is left as it is, for the call's
// validation to refuse; a moved time is kept within that range.
func (f frame) in(t time.Time) time.Time { return f.shift(t, f.off) }

// out moves t, read from the database, into the caller's frame.
func (f frame) out(t time.Time) time.Time { return f.shift(t, -f.off) }

func (f frame) shift(t time.Time, by time.Duration) time.Time {
	if by == 0 || t.IsZero() || t.Before(turnframe.MinTime) || t.After(turnframe.MaxTime) {
		return t
	}
	t = t.Add(by)
	switch {
	case t.Before(turnframe.MinTime):
		return turnframe.MinTime
	case t.After(turnframe.MaxTime):
		return turnframe.MaxTime
	}
	return t
}

// latest returns the latest of the settlements' times: the caller's now of
// a group commit.
func latest(ss []turnframe.OutboxSettlement) time.Time {
	var t time.Time
	for _, st := range ss {
		if st.Now.After(t) {
			t = st.Now
		}
	}
	return t
}
