package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// A COMMIT without an answer. A write transaction whose COMMIT was sent and
// never answered (the connection broke, or the caller's context ended and
// pgx closed it) may have committed or not: commitUnknown. The server can
// tell: the transaction's id, once it has one, is kept in the commit log,
// and pg_xact_status reads it there. So a write transaction reads its id
// (xidSQL) at the end of each of its batches before the COMMIT's, until it
// has one: PostgreSQL gives a transaction its id with its first write or
// row lock, and every write of the store locks or writes in its first
// round trip (a Write locks or inserts its turn, a claim updates its rows,
// a settlement locks them), so the id comes with the first batch's answer,
// in no round trip of its own. When the COMMIT goes unanswered,
// commitOutcome asks the server on another connection what became of it.
// (The functions are PostgreSQL 13's. An id names one transaction on one
// server's timeline: after a failover that lost every WAL record of the
// transaction, the promoted server may give its id to another; asked
// then, within commitOutcome's bound, it answers for that one.)

// xidSQL reads the id of the transaction it runs in, or NULL while it has
// none: it never gives the transaction an id (pg_current_xact_id would),
// so a transaction that writes nothing stays one the server commits
// without a commit record to flush.
const xidSQL = `SELECT pg_current_xact_id_if_assigned()::text`

// xactStatusSQL asks what became of a transaction: 'committed', 'aborted'
// (rolled back, or its server crashed before it committed), or 'in
// progress' (its session still runs it: finishing its COMMIT, or not yet
// aware that its connection is gone).
const xactStatusSQL = `SELECT pg_xact_status($1::text::xid8)`

// defaultCommitWait bounds how long commitOutcome waits for a transaction
// that is still in progress to end.
const defaultCommitWait = 5 * time.Second

// xact is what a write transaction knows of its id: whether it asks for
// it (runTx's transactions, until their COMMIT is sent), the id, once
// read, and whether the last read answered that it has none yet.
type xact struct {
	askXid bool
	xid    string
	none   bool
}

// wantsXid reports whether the next batch should read the transaction's
// id.
func (x *xact) wantsXid() bool { return x.askXid && x.xid == "" }

// queueXid queues xidSQL last in b, when the transaction still wants its
// id: the batch's results read it when they are closed (pgx runs the
// function of a statement the caller did not read itself then). Its error,
// if any, is the batch's, never the caller's: an id not read is an id not
// known.
func (x *xact) queueXid(b *pgx.Batch) {
	if !x.wantsXid() {
		return
	}
	x.none = false // until this read answers so
	b.Queue(xidSQL).QueryRow(func(row pgx.Row) error {
		var id *string
		err := row.Scan(&id)
		x.none = err == nil && id == nil
		if err == nil && id != nil {
			x.xid = *id
		}
		return nil
	})
}

// commitOutcome resolves err, when it is a COMMIT that went unanswered
// (commitUnknown) of a transaction whose id is known, by asking the server
// on another connection: committed, the write landed, and the call
// succeeds as if the answer had come (nil); rolled back, nothing was
// written, as on a connection lost before the COMMIT (errConnLost: run
// again, unless it ran an App, or ErrBusy); still in progress, it asks
// again, backing off, until the transaction ends; a question whose own
// connection was lost or could not be opened is asked again too. When it cannot tell
// within defaultCommitWait (a session the server still holds open, a
// server it cannot reach), err stays what it was. The question outlives
// the caller's context, within that bound: an ended context is what most
// often leaves a COMMIT unanswered (pgx closes the connection under it),
// and the write it cut short may have landed all the same.
//
// A transaction that never had an id when its COMMIT was sent alone (no
// statement queued with it, no App) wrote nothing, so there is nothing to
// ask: committed or rolled back, the database is as it was, and what the
// transaction read and decided stands (nil). A redelivery is one: it reads
// the turn its message began and writes nothing.
func (s *Store) commitOutcome(ctx context.Context, err error) error {
	var unknown commitUnknown
	if !errors.As(err, &unknown) {
		return err
	}
	if unknown.wroteNothing {
		return nil
	}
	if unknown.xid == "" {
		return err
	}
	wait := s.commitWait
	if wait <= 0 {
		wait = defaultCommitWait
	}
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), wait)
	defer cancel()
	for backoff := time.Millisecond; ; backoff = min(2*backoff, 100*time.Millisecond) {
		var status *string
		// On a connection of its own (readPool): the answer was most
		// often lost with the server (a restart, a failover), and the
		// pool's other connections with it. A question whose connection
		// is lost, or cannot be opened, is asked again on another.
		qerr := readPool{s.pool}.QueryRow(qctx, xactStatusSQL, unknown.xid).Scan(&status)
		switch {
		case qerr != nil && !errors.Is(qerr, errConnLost), qerr == nil && status == nil:
			return fmt.Errorf("the COMMIT went unanswered, and asking the server what became of the transaction failed (%v): %w", qerr, err)
		case qerr == nil && *status == "committed":
			return nil
		case qerr == nil && *status == "aborted":
			return fmt.Errorf("%w: the COMMIT went unanswered, and the server rolled the transaction back: %w", errConnLost, unknown.error)
		}
		t := time.NewTimer(backoff)
		select {
		case <-qctx.Done():
			t.Stop()
			if qerr != nil {
				return fmt.Errorf("the COMMIT went unanswered, and the server could not be asked what became of the transaction within %v (%v): %w", wait, qerr, err)
			}
			return fmt.Errorf("the COMMIT went unanswered, and the transaction was still in progress on the server after %v: %w", wait, err)
		case <-t.C:
		}
	}
}
