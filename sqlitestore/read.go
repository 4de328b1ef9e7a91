package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/turnframe/turnframe"
)

// Every read goes through the read pool: it sees the last commit and never
// waits for a writer.

// TurnPhase returns the turn's phase marker. ErrInvalid for a bad account or
// a zero id; ErrNotFound if the turn does not exist for account.
func (s *Store) TurnPhase(ctx context.Context, account turnframe.AccountID, turn turnframe.TurnID) (turnframe.TurnPhaseMarker, error) {
	t, err := s.LoadTurn(ctx, account, turn)
	if err != nil {
		return turnframe.TurnPhaseMarker{}, err
	}
	return marker(t), nil
}

// LoadTurn returns the stored turn. ErrInvalid for a bad account or a zero
// id; ErrNotFound if the turn does not exist for account.
func (s *Store) LoadTurn(ctx context.Context, account turnframe.AccountID, turn turnframe.TurnID) (turnframe.StoredTurn, error) {
	if err := turnframe.CheckTurnRef(account, turn); err != nil {
		return turnframe.StoredTurn{}, err
	}
	done, err := s.enter("load turn")
	if err != nil {
		return turnframe.StoredTurn{}, err
	}
	defer done()
	t, err := findTurn(ctx, s.reads, account, turn)
	if err != nil {
		return t, s.fail(ctx, "load turn", err)
	}
	return t, nil
}

const findTurnSQL = `SELECT ` + turnCols + ` FROM turns WHERE id = ? AND account = ?`

func findTurn(ctx context.Context, q querier, account turnframe.AccountID, turn turnframe.TurnID) (turnframe.StoredTurn, error) {
	t, err := scanTurn(q.QueryRowContext(ctx, findTurnSQL, turn.String(), string(account)))
	if errors.Is(err, sql.ErrNoRows) {
		return t, fmt.Errorf("turn %v: %w", turn, turnframe.ErrNotFound)
	}
	return t, translate(ctx, err)
}

// unfinishedSQL lists the turns recovery must look at, restating
// turnframe.Unfinished as a listing filter: non-terminal turns, turns
// holding an outcome_unknown or needs_intervention entry (journal_unknown's
// condition, repeated literally), delivered turns holding a pending or
// executing entry or an awaiting_approval one (journal_awaiting), and
// abandoned turns holding an executing one. It also returns the four facts
// Unfinished takes, so every listed turn is checked against the rule.
//
// Its parameters: ?1 the cursor (a turn id, or ” for the first page: every
// id sorts after it), ?2 the limit, ?3 the scope's account (” for every
// account), ?4 its UpdatedBefore in microseconds (0 for none). Each of the
// four parts walks its partial index in turn order from the cursor on, with
// the scope's account and time applied as it walks, and stops at ?2
// distinct turns: the first ?2 turns of the union are among them. So a page
// reads at most four times the limit of matching turns, whatever lies after
// them, rather than every unfinished turn after the cursor; what it reads of
// other accounts' turns is what lies between the cursor and the page's end
// in the partial indexes (they hold no account). The journal parts name
// journal first with CROSS JOIN, which fixes SQLite's loop order: the
// journal's partial index outside, the turn found by its key inside.
const unfinishedSQL = `SELECT ` + turnCols + `,
		EXISTS (SELECT 1 FROM journal AS u WHERE u.turn = t.id AND u.status IN ('outcome_unknown', 'needs_intervention')),
		EXISTS (SELECT 1 FROM journal AS p WHERE p.turn = t.id AND p.status IN ('pending', 'executing')),
		EXISTS (SELECT 1 FROM journal AS x WHERE x.turn = t.id AND x.status IN ('pending', 'executing') AND x.status = 'executing'),
		EXISTS (SELECT 1 FROM journal AS w WHERE w.turn = t.id AND w.status = 'awaiting_approval')
	FROM turns AS t
	WHERE t.id IN (
		SELECT id FROM (SELECT id FROM turns
			WHERE phase NOT IN ('delivered', 'abandoned') AND id > ?1
			  AND (?3 = '' OR account = ?3) AND (?4 = 0 OR updated_at < ?4)
			ORDER BY id LIMIT ?2)
		UNION
		SELECT turn FROM (SELECT DISTINCT j.turn FROM journal AS j CROSS JOIN turns AS d ON d.id = j.turn
			WHERE j.status IN ('outcome_unknown', 'needs_intervention') AND j.turn > ?1
			  AND (?3 = '' OR d.account = ?3) AND (?4 = 0 OR d.updated_at < ?4)
			ORDER BY j.turn LIMIT ?2)
		UNION
		SELECT turn FROM (SELECT DISTINCT j.turn FROM journal AS j CROSS JOIN turns AS d ON d.id = j.turn
			WHERE j.status IN ('pending', 'executing') AND j.turn > ?1
			  AND (d.phase = 'delivered' OR (d.phase = 'abandoned' AND j.status = 'executing'))
			  AND (?3 = '' OR d.account = ?3) AND (?4 = 0 OR d.updated_at < ?4)
			ORDER BY j.turn LIMIT ?2)
		UNION
		SELECT turn FROM (SELECT DISTINCT a.turn FROM journal AS a CROSS JOIN turns AS d ON d.id = a.turn
			WHERE a.status = 'awaiting_approval' AND a.turn > ?1 AND d.phase = 'delivered'
			  AND (?3 = '' OR d.account = ?3) AND (?4 = 0 OR d.updated_at < ?4)
			ORDER BY a.turn LIMIT ?2))
	ORDER BY t.id LIMIT ?2`

// ListUnfinishedTurns returns, oldest first (by turn id), at most limit
// turns in scope for which turnframe.Unfinished holds: non-terminal turns,
// turns holding an OutcomeUnknown or NeedsIntervention entry, delivered
// turns holding a pending, executing or awaiting_approval entry, and abandoned turns holding
// an executing entry. A scope's UpdatedBefore leaves out turns updated at
// or after it; its After, when not zero, every turn whose id
// does not sort after it (pass the last turn of a page to get the next).
// ErrInvalid for a bad scope (turnframe.RecoveryScope.Validate) or a limit
// outside 1–MaxLimit.
func (s *Store) ListUnfinishedTurns(ctx context.Context, scope turnframe.RecoveryScope, limit int) ([]turnframe.TurnPhaseMarker, error) {
	if err := scope.Validate(); err != nil {
		return nil, err
	}
	if err := turnframe.CheckLimit("limit", limit); err != nil {
		return nil, err
	}
	done, err := s.enter("list unfinished turns")
	if err != nil {
		return nil, err
	}
	defer done()
	var before int64
	if b := stamp(scope.UpdatedBefore); !b.IsZero() {
		before = micros(b)
	}
	rows, err := s.reads.QueryContext(ctx, unfinishedSQL, idText(scope.After), limit, string(scope.Account), before)
	if err != nil {
		return nil, s.fail(ctx, "list unfinished turns", err)
	}
	defer rows.Close()
	var out []turnframe.TurnPhaseMarker
	for rows.Next() {
		var unknown, pending, executing, awaiting bool
		t, err := scanTurn(rows, &unknown, &pending, &executing, &awaiting)
		if err != nil {
			return nil, s.fail(ctx, "list unfinished turns", err)
		}
		if !turnframe.Unfinished(t.Phase, unknown, pending, executing, awaiting) {
			return nil, s.fail(ctx, "list unfinished turns",
				fmt.Errorf("turn %v (%v, unknown %t, pending %t, executing %t, awaiting %t) listed, but turnframe.Unfinished says finished",
					t.ID, t.Phase, unknown, pending, executing, awaiting))
		}
		out = append(out, marker(t))
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail(ctx, "list unfinished turns", err)
	}
	return out, nil
}

// ForTurn returns the entries the turn admitted, in admission order; none
// (and no error) for a turn with none or of another account. ErrInvalid for
// a bad account or a zero id.
func (s *Store) ForTurn(ctx context.Context, account turnframe.AccountID, turn turnframe.TurnID) ([]turnframe.JournalEntry, error) {
	if err := turnframe.CheckTurnRef(account, turn); err != nil {
		return nil, err
	}
	done, err := s.enter("for turn")
	if err != nil {
		return nil, err
	}
	defer done()
	rows, err := s.reads.QueryContext(ctx, forTurnSQL, turn.String(), string(account))
	if err != nil {
		return nil, s.fail(ctx, "for turn", err)
	}
	defer rows.Close()
	var out []turnframe.JournalEntry
	for rows.Next() {
		e, err := scanEntry(rows)
		if err != nil {
			return nil, s.fail(ctx, "for turn", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail(ctx, "for turn", err)
	}
	return out, nil
}

// ByKey returns the entry admitted under key. ErrInvalid for a bad account
// or key; ErrNotFound if account never used key.
func (s *Store) ByKey(ctx context.Context, account turnframe.AccountID, key turnframe.IdempotencyKey) (turnframe.JournalEntry, error) {
	if err := account.Validate(); err != nil {
		return turnframe.JournalEntry{}, err
	}
	if err := key.ValidateStored(); err != nil {
		return turnframe.JournalEntry{}, err
	}
	done, err := s.enter("by key")
	if err != nil {
		return turnframe.JournalEntry{}, err
	}
	defer done()
	e, err := findEntry(ctx, s.reads, account, key)
	if err != nil {
		return e, s.fail(ctx, "by key", err)
	}
	return e, nil
}

const findEntrySQL = `SELECT ` + entryCols + ` FROM journal WHERE account = ? AND key = ?`

func findEntry(ctx context.Context, q querier, account turnframe.AccountID, key turnframe.IdempotencyKey) (turnframe.JournalEntry, error) {
	e, err := scanEntry(q.QueryRowContext(ctx, findEntrySQL, string(account), string(key)))
	if errors.Is(err, sql.ErrNoRows) {
		return e, fmt.Errorf("key %q: %w", key, turnframe.ErrNotFound)
	}
	return e, translate(ctx, err)
}

// EventsByID returns the events with these ids, in append order, each once.
// Ids that do not exist for account are simply absent. ErrInvalid for a bad
// account or a zero id.
func (s *Store) EventsByID(ctx context.Context, account turnframe.AccountID, ids []turnframe.EventID) ([]turnframe.StoredEvent, error) {
	if err := account.Validate(); err != nil {
		return nil, err
	}
	texts := make([]string, len(ids))
	for i, id := range ids {
		if err := turnframe.CheckID(fmt.Sprintf("ids[%d]", i), id); err != nil {
			return nil, err
		}
		texts[i] = id.String()
	}
	done, err := s.enter("events by id")
	if err != nil {
		return nil, err
	}
	defer done()
	out := []turnframe.StoredEvent{}
	if len(ids) == 0 {
		return out, nil
	}
	list, err := json.Marshal(texts)
	if err != nil {
		return nil, s.fail(ctx, "events by id", err)
	}
	rows, err := s.reads.QueryContext(ctx, eventsByIDSQL, string(list), string(account))
	return s.scanEvents(ctx, "events by id", out, rows, err)
}

// EventsSince returns at most limit events of the case with a revision
// above since, in revision order. ErrInvalid for a bad account or case, or
// a limit outside 1–MaxLimit.
func (s *Store) EventsSince(ctx context.Context, account turnframe.AccountID, c turnframe.CaseKey, since turnframe.CaseRevision, limit int) ([]turnframe.StoredEvent, error) {
	if err := account.Validate(); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if err := turnframe.CheckLimit("limit", limit); err != nil {
		return nil, err
	}
	done, err := s.enter("events since")
	if err != nil {
		return nil, err
	}
	defer done()
	if since >= math.MaxInt64 {
		return nil, nil // no stored revision is above it
	}
	rows, err := s.reads.QueryContext(ctx, eventsSinceSQL, string(account), string(c), int64(since), limit)
	return s.scanEvents(ctx, "events since", nil, rows, err)
}

func (s *Store) scanEvents(ctx context.Context, op string, out []turnframe.StoredEvent, rows *sql.Rows, err error) ([]turnframe.StoredEvent, error) {
	if err != nil {
		return nil, s.fail(ctx, op, err)
	}
	defer rows.Close()
	for rows.Next() {
		ev, err := scanEvent(rows)
		if err != nil {
			return nil, s.fail(ctx, op, err)
		}
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail(ctx, op, err)
	}
	return out, nil
}

// CaseRevision returns the case's revision: 0 for a case with no event.
// ErrInvalid for a bad account or case.
func (s *Store) CaseRevision(ctx context.Context, account turnframe.AccountID, c turnframe.CaseKey) (turnframe.CaseRevision, error) {
	if err := account.Validate(); err != nil {
		return 0, err
	}
	if err := c.Validate(); err != nil {
		return 0, err
	}
	done, err := s.enter("case revision")
	if err != nil {
		return 0, err
	}
	defer done()
	rev, err := caseRevision(ctx, s.reads, account, c)
	if err != nil {
		return 0, s.fail(ctx, "case revision", err)
	}
	return rev, nil
}

const caseRevisionSQL = `SELECT coalesce(max(revision), 0) FROM events WHERE account = ? AND case_key = ?`

func caseRevision(ctx context.Context, q querier, account turnframe.AccountID, c turnframe.CaseKey) (turnframe.CaseRevision, error) {
	var rev int64
	err := q.QueryRowContext(ctx, caseRevisionSQL, string(account), string(c)).Scan(&rev)
	if err != nil {
		return 0, fmt.Errorf("revision of case %q: %w", c, translate(ctx, err))
	}
	return turnframe.CaseRevision(rev), nil
}

// Replay returns the turn's replay record. ErrInvalid for a bad account or
// a zero id; ErrNotFound if the turn has none or does not exist for account.
func (s *Store) Replay(ctx context.Context, account turnframe.AccountID, turn turnframe.TurnID) (turnframe.ReplayRecord, error) {
	var r turnframe.ReplayRecord
	if err := turnframe.CheckTurnRef(account, turn); err != nil {
		return r, err
	}
	done, err := s.enter("replay")
	if err != nil {
		return r, err
	}
	defer done()
	var text sql.NullString
	err = s.reads.QueryRowContext(ctx, replaySQL, turn.String(), string(account)).Scan(&text)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return r, fmt.Errorf("sqlitestore: replay: turn %v: %w", turn, turnframe.ErrNotFound)
	case err != nil:
		return r, s.fail(ctx, "replay", err)
	case !text.Valid:
		return r, fmt.Errorf("sqlitestore: replay: turn %v has no replay record: %w", turn, turnframe.ErrNotFound)
	}
	if err := json.Unmarshal([]byte(text.String), &r); err != nil {
		return turnframe.ReplayRecord{}, s.fail(ctx, "replay", fmt.Errorf("stored replay record: %w", err))
	}
	return r, nil
}
