package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/turnframe/turnframe"
)

// The reads of this file are for operator tools (the turnframe command):
// summaries and lookups that turnframe.Store has no call for. Like every
// read of the store they run on the pool outside any transaction, at READ
// COMMITTED: each statement sees what was committed when it began, takes no
// lock a writer waits for, and waits for no writer. Times are in the caller's
// frame (WithHostClock), as the Store's own reads return them.

// Counts is how many rows of each kind a database holds, by status or phase.
// A status or phase without rows is absent from its map.
type Counts struct {
	Outbox  map[turnframe.OutboxStatus]int
	Turns   map[turnframe.TurnPhase]int
	Journal map[turnframe.JournalStatus]int
}

// Counts counts the outbox rows per status, the turns per phase and the
// journal entries per status, one statement each (so the three need not
// agree with each other while writers run).
func (s *Store) Counts(ctx context.Context) (Counts, error) {
	done, err := s.enter("counts")
	if err != nil {
		return Counts{}, err
	}
	defer done()
	c := Counts{Outbox: map[turnframe.OutboxStatus]int{}, Turns: map[turnframe.TurnPhase]int{},
		Journal: map[turnframe.JournalStatus]int{}}
	if err := countBy(ctx, s.db, "SELECT status, count(*) FROM outbox GROUP BY status", c.Outbox, turnframe.ParseOutboxStatus); err != nil {
		return Counts{}, s.fail(ctx, "counts: outbox", err)
	}
	if err := countBy(ctx, s.db, "SELECT phase, count(*) FROM turns GROUP BY phase", c.Turns, turnframe.ParseTurnPhase); err != nil {
		return Counts{}, s.fail(ctx, "counts: turns", err)
	}
	if err := countBy(ctx, s.db, "SELECT status, count(*) FROM journal GROUP BY status", c.Journal, turnframe.ParseJournalStatus); err != nil {
		return Counts{}, s.fail(ctx, "counts: journal", err)
	}
	return c, nil
}

func countBy[K comparable](ctx context.Context, q querier, query string, into map[K]int, parse func(string) (K, error)) error {
	rows, err := q.Query(ctx, query)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var n int
		if err := rows.Scan(&name, &n); err != nil {
			return err
		}
		k, err := parse(name)
		if err != nil {
			return fmt.Errorf("stored %q: %w", name, err)
		}
		into[k] = n
	}
	return rows.Err()
}

// Due is what a claim at one moment would find (DueAt).
type Due struct {
	// Rows is how many rows a claim would take: Pending, due, and not
	// held behind an earlier row of their account and order key.
	Rows int
	// Held is how many Pending rows whose due time came are held behind
	// an earlier row of their order key.
	Held int
	// Oldest is the due row a claim would take first, and OldestDueAt its
	// due time; both zero when no row is due.
	Oldest      turnframe.OutboxID
	OldestDueAt time.Time
}

// dueSQL is the condition of claimSQL, on the outbox row o with $1 the
// time: a claim at $1 would take the row.
const dueSQL = `o.status = 'pending' AND NOT o.held AND o.due_at <= $1 AND NOT (o.order_key <> '' AND EXISTS (
		SELECT 1 FROM outbox AS p
		WHERE p.account = o.account AND p.order_key = o.order_key AND p.order_key <> ''
		  AND p.seq < o.seq AND p.status IN ('pending', 'dispatching', 'outcome_unknown', 'needs_intervention')))`

// DueAt says what a claim at now (the caller's time) would find, by the
// claim's own rule (ClaimDue), without claiming anything. As for ClaimDue,
// now is the caller's present: in DatabaseClock mode it only sets the
// call's frame, and the rows due are those due on the database's clock.
// ErrInvalid for a zero or out-of-range now.
func (s *Store) DueAt(ctx context.Context, now time.Time) (Due, error) {
	if err := turnframe.CheckTime("now", now); err != nil {
		return Due{}, err
	}
	f, err := s.frameAt(ctx, s.pool, "due", now)
	if err != nil {
		return Due{}, err
	}
	done, err := s.enter("due")
	if err != nil {
		return Due{}, err
	}
	defer done()
	us := micros(f.in(now))
	var d Due
	if err := s.db.QueryRow(ctx, `SELECT count(*) FROM outbox AS o WHERE `+dueSQL, us).Scan(&d.Rows); err != nil {
		return Due{}, s.fail(ctx, "due: count", err)
	}
	if err := s.db.QueryRow(ctx, `SELECT count(*) FROM outbox AS o
		WHERE o.status = 'pending' AND o.due_at <= $1 AND NOT (`+dueSQL+`)`, us).Scan(&d.Held); err != nil {
		return Due{}, s.fail(ctx, "due: count held", err)
	}
	var id string
	var due int64
	err = s.db.QueryRow(ctx, `SELECT o.id, o.due_at FROM outbox AS o WHERE `+dueSQL+` ORDER BY o.due_at, o.seq LIMIT 1`, us).
		Scan(&id, &due)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return d, nil
	case err != nil:
		return Due{}, s.fail(ctx, "due: oldest", err)
	}
	if d.Oldest, err = parseID("outbox id", id, turnframe.ParseOutboxID); err != nil {
		return Due{}, s.fail(ctx, "due: oldest", err)
	}
	d.OldestDueAt = f.out(fromMicros(due))
	return d, nil
}

// EndedLeases returns the ids of at most limit Dispatching rows whose lease
// ended at now (the caller's time), longest ended first, and how many there
// are: the rows ExpireClaims at now would mark OutcomeUnknown (now, as for
// ExpireClaims, is the caller's present; in DatabaseClock mode the leases
// are judged on the database's clock). ErrInvalid for a bad now or a limit
// outside 1–MaxLimit.
func (s *Store) EndedLeases(ctx context.Context, now time.Time, limit int) ([]turnframe.OutboxID, int, error) {
	if err := turnframe.CheckTime("now", now); err != nil {
		return nil, 0, err
	}
	if err := turnframe.CheckLimit("limit", limit); err != nil {
		return nil, 0, err
	}
	f, err := s.frameAt(ctx, s.pool, "ended leases", now)
	if err != nil {
		return nil, 0, err
	}
	done, err := s.enter("ended leases")
	if err != nil {
		return nil, 0, err
	}
	defer done()
	const ended = `status = 'dispatching' AND lease_until <= $1`
	us := micros(f.in(now))
	var n int
	if err := s.db.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE `+ended, us).Scan(&n); err != nil {
		return nil, 0, s.fail(ctx, "ended leases", err)
	}
	ids, err := scanIDs(ctx, s.db, turnframe.ParseOutboxID,
		`SELECT id FROM outbox WHERE `+ended+` ORDER BY lease_until, seq LIMIT $2`, us, limit)
	if err != nil {
		return nil, 0, s.fail(ctx, "ended leases", err)
	}
	return ids, n, nil
}

// EntryRef names a journal entry: the account that admitted it, and its key.
type EntryRef struct {
	Account turnframe.AccountID
	Key     turnframe.IdempotencyKey
}

// EntriesIn returns at most limit journal entries in status, longest in it
// first (by their last update), and how many there are. ErrInvalid for an
// unknown status or a limit outside 1–MaxLimit.
func (s *Store) EntriesIn(ctx context.Context, status turnframe.JournalStatus, limit int) ([]EntryRef, int, error) {
	if _, err := turnframe.ParseJournalStatus(status.String()); err != nil {
		return nil, 0, &turnframe.InvalidError{Field: "status", Reason: err.Error()}
	}
	if err := turnframe.CheckLimit("limit", limit); err != nil {
		return nil, 0, err
	}
	done, err := s.enter("entries in")
	if err != nil {
		return nil, 0, err
	}
	defer done()
	var n int
	if err := s.db.QueryRow(ctx, `SELECT count(*) FROM journal WHERE status = $1`, status.String()).Scan(&n); err != nil {
		return nil, 0, s.fail(ctx, "entries in", err)
	}
	rows, err := s.db.Query(ctx, `SELECT account, key FROM journal WHERE status = $1 ORDER BY updated_at, seq LIMIT $2`,
		status.String(), limit)
	if err != nil {
		return nil, 0, s.fail(ctx, "entries in", err)
	}
	defer rows.Close()
	out := []EntryRef{}
	for rows.Next() {
		var account, key string
		if err := rows.Scan(&account, &key); err != nil {
			return nil, 0, s.fail(ctx, "entries in", err)
		}
		out = append(out, EntryRef{Account: turnframe.AccountID(account), Key: turnframe.IdempotencyKey(key)})
	}
	if err := rows.Err(); err != nil {
		return nil, 0, s.fail(ctx, "entries in", err)
	}
	return out, n, nil
}

// ListTurns returns at most limit turns, finished or not, in id order
// (oldest first), whose id sorts after after (every turn for a zero after),
// of account only when account is not empty. ErrInvalid for a bad account
// or a limit outside 1–MaxLimit.
func (s *Store) ListTurns(ctx context.Context, account turnframe.AccountID, after turnframe.TurnID, limit int) ([]turnframe.TurnPhaseMarker, error) {
	if account != "" {
		if err := account.Validate(); err != nil {
			return nil, err
		}
	}
	if err := turnframe.CheckLimit("limit", limit); err != nil {
		return nil, err
	}
	f, err := s.frame(ctx, "list turns")
	if err != nil {
		return nil, err
	}
	done, err := s.enter("list turns")
	if err != nil {
		return nil, err
	}
	defer done()
	query, args := `SELECT `+turnCols+` FROM turns WHERE id > $1`, []any{idText(after)}
	if account != "" {
		query += ` AND account = $3`
		args = append(args, limit, string(account))
	} else {
		args = append(args, limit)
	}
	rows, err := s.db.Query(ctx, query+` ORDER BY id LIMIT $2`, args...)
	if err != nil {
		return nil, s.fail(ctx, "list turns", err)
	}
	defer rows.Close()
	out := []turnframe.TurnPhaseMarker{}
	for rows.Next() {
		t, err := scanTurn(rows)
		if err != nil {
			return nil, s.fail(ctx, "list turns", err)
		}
		out = append(out, f.markerOut(marker(t)))
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail(ctx, "list turns", err)
	}
	return out, nil
}

// TurnAccount returns the account of the turn with this id, for a tool
// that has only the id (every read of a turn takes its account too).
// ErrInvalid for a zero id; ErrNotFound when no turn has it.
func (s *Store) TurnAccount(ctx context.Context, turn turnframe.TurnID) (turnframe.AccountID, error) {
	if err := turnframe.CheckID("turn", turn); err != nil {
		return "", err
	}
	done, err := s.enter("turn account")
	if err != nil {
		return "", err
	}
	defer done()
	var account string
	err = s.db.QueryRow(ctx, `SELECT account FROM turns WHERE id = $1`, turn.String()).Scan(&account)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("pgstore: turn account: turn %v: %w", turn, turnframe.ErrNotFound)
	}
	if err != nil {
		return "", s.fail(ctx, "turn account", err)
	}
	return turnframe.AccountID(account), nil
}

// TurnOutbox returns the ids of at most limit outbox rows the turn
// enqueued whose id sorts after after (every row for the zero id), in id
// order: enqueue order, since a turn's writes run one at a time and ids are
// made in time order. A cursor row pruned since is no matter: the listing
// goes on from its id. None for a turn that enqueued none or does not
// exist. ErrInvalid for a zero turn id or a limit outside 1–MaxLimit.
func (s *Store) TurnOutbox(ctx context.Context, turn turnframe.TurnID, after turnframe.OutboxID, limit int) ([]turnframe.OutboxID, error) {
	if err := turnframe.CheckID("turn", turn); err != nil {
		return nil, err
	}
	if err := turnframe.CheckLimit("limit", limit); err != nil {
		return nil, err
	}
	done, err := s.enter("turn outbox")
	if err != nil {
		return nil, err
	}
	defer done()
	ids, err := scanIDs(ctx, s.db, turnframe.ParseOutboxID,
		`SELECT id FROM outbox WHERE turn = $1 AND id > $2 ORDER BY id LIMIT $3`, turn.String(), idText(after), limit)
	if err != nil {
		return nil, s.fail(ctx, "turn outbox", err)
	}
	return ids, nil
}

// OutboxBefore returns the id of the outbox row whose id sorts last before
// id (of account, when not empty), or the zero id when there is none: the
// cursor of the page before a listing that starts after id. It reads the
// outbox's id index backwards (its UNIQUE constraint, in byte order, as ids
// sort). ErrInvalid for a zero id.
func (s *Store) OutboxBefore(ctx context.Context, id turnframe.OutboxID, account turnframe.AccountID) (turnframe.OutboxID, error) {
	if err := turnframe.CheckID("id", id); err != nil {
		return turnframe.OutboxID{}, err
	}
	done, err := s.enter("outbox before")
	if err != nil {
		return turnframe.OutboxID{}, err
	}
	defer done()
	query, args := `SELECT id FROM outbox WHERE id < $1`, []any{id.String()}
	if account != "" {
		query, args = `SELECT id FROM outbox WHERE id < $1 AND account = $2`, append(args, string(account))
	}
	ids, err := scanIDs(ctx, s.db, turnframe.ParseOutboxID, query+` ORDER BY id DESC LIMIT 1`, args...)
	if err != nil {
		return turnframe.OutboxID{}, s.fail(ctx, "outbox before", err)
	}
	if len(ids) == 0 {
		return turnframe.OutboxID{}, nil
	}
	return ids[0], nil
}

// DestinationCount is how many outbox rows of one destination are in one
// status.
type DestinationCount struct {
	Destination string
	Status      turnframe.OutboxStatus
	Rows        int
}

// DestinationCounts counts the outbox rows of the first n destinations, in
// name order (of their bytes, as sqlitestore's, whatever the database's
// collation), per status (statuses without rows absent), sorted by
// destination. ErrInvalid for an n outside 1–MaxLimit.
func (s *Store) DestinationCounts(ctx context.Context, n int) ([]DestinationCount, error) {
	if err := turnframe.CheckLimit("n", n); err != nil {
		return nil, err
	}
	done, err := s.enter("destination counts")
	if err != nil {
		return nil, err
	}
	defer done()
	// COLLATE "C": byte order, as SQLite's, whatever the database's default.
	rows, err := s.db.Query(ctx, `SELECT destination, status, count(*) FROM outbox
		WHERE destination COLLATE "C" IN (SELECT d FROM (SELECT DISTINCT destination COLLATE "C" AS d FROM outbox) AS names ORDER BY d LIMIT $1)
		GROUP BY destination, status ORDER BY destination COLLATE "C", status`, n)
	if err != nil {
		return nil, s.fail(ctx, "destination counts", err)
	}
	defer rows.Close()
	out := []DestinationCount{}
	for rows.Next() {
		var c DestinationCount
		var status string
		if err := rows.Scan(&c.Destination, &status, &c.Rows); err != nil {
			return nil, s.fail(ctx, "destination counts", err)
		}
		if c.Status, err = turnframe.ParseOutboxStatus(status); err != nil {
			return nil, s.fail(ctx, "destination counts", fmt.Errorf("stored %q: %w", status, err))
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail(ctx, "destination counts", err)
	}
	return out, nil
}

// scanIDs runs query and parses the one text column of each row as an id.
func scanIDs[T any](ctx context.Context, q querier, parse func(string) (T, error), query string, args ...any) ([]T, error) {
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var text string
		if err := rows.Scan(&text); err != nil {
			return nil, err
		}
		id, err := parseID("id", text, parse)
		if err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}
