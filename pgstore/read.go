package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5"
	"github.com/turnframe/turnframe"
)

// Every read goes through the pool outside any transaction: it sees what
// was committed when its statement began, and waits for no writer.

// TurnPhase returns the turn's phase marker. ErrInvalid for a bad account or
// a zero id; ErrNotFound if the turn does not exist for account.
func (s *Store) TurnPhase(ctx context.Context, account turnframe.AccountID, turn turnframe.TurnID) (turnframe.TurnPhaseMarker, error) {
	f, err := s.frame(ctx, "turn phase")
	if err != nil {
		return turnframe.TurnPhaseMarker{}, err
	}
	m, err := s.dbTurnPhase(ctx, account, turn)
	return f.markerOut(m), err
}

// dbTurnPhase is TurnPhase on times in the store's frame (frame.go).
func (s *Store) dbTurnPhase(ctx context.Context, account turnframe.AccountID, turn turnframe.TurnID) (turnframe.TurnPhaseMarker, error) {
	t, err := s.dbLoadTurn(ctx, account, turn) // in the store's frame: TurnPhase moves it out, once
	if err != nil {
		return turnframe.TurnPhaseMarker{}, err
	}
	return marker(t), nil
}

// LoadTurn returns the stored turn. ErrInvalid for a bad account or a zero
// id; ErrNotFound if the turn does not exist for account.
func (s *Store) LoadTurn(ctx context.Context, account turnframe.AccountID, turn turnframe.TurnID) (turnframe.StoredTurn, error) {
	f, err := s.frame(ctx, "load turn")
	if err != nil {
		return turnframe.StoredTurn{}, err
	}
	t, err := s.dbLoadTurn(ctx, account, turn)
	return f.turnOut(t), err
}

// dbLoadTurn is LoadTurn on times in the store's frame (frame.go).
func (s *Store) dbLoadTurn(ctx context.Context, account turnframe.AccountID, turn turnframe.TurnID) (turnframe.StoredTurn, error) {
	if err := turnframe.CheckTurnRef(account, turn); err != nil {
		return turnframe.StoredTurn{}, err
	}
	done, err := s.enter("load turn")
	if err != nil {
		return turnframe.StoredTurn{}, err
	}
	defer done()
	t, err := findTurn(ctx, s.db, account, turn)
	if err != nil {
		return t, s.fail(ctx, "load turn", err)
	}
	return t, nil
}

const findTurnSQL = `SELECT ` + turnCols + ` FROM turns WHERE id = $1 AND account = $2`

func findTurn(ctx context.Context, q querier, account turnframe.AccountID, turn turnframe.TurnID) (turnframe.StoredTurn, error) {
	t, err := scanTurn(q.QueryRow(ctx, findTurnSQL, turn.String(), string(account)))
	if errors.Is(err, pgx.ErrNoRows) {
		return t, fmt.Errorf("turn %v: %w", turn, turnframe.ErrNotFound)
	}
	return t, err
}

// unfinishedSQL lists the turns recovery must look at, restating
// turnframe.Unfinished as a listing filter: non-terminal turns
// (turns_unfinished), turns holding an outcome_unknown or
// needs_intervention entry (journal_unknown), delivered turns holding a
// pending or executing entry (journal_pending) or an awaiting_approval one
// (journal_awaiting), and abandoned turns holding an executing one. It also
// returns the four facts Unfinished takes, so every listed turn is checked
// against the rule.
//
// Its parameters: $1 the cursor (a turn id, or the empty string for the
// first page), $2 the limit, $3 the scope's account (” for every account),
// $4 its UpdatedBefore in microseconds (0 for none). Each of the four parts
// walks its partial index in turn order from the cursor on, with the
// scope's account and time applied as it walks (the turn found by its key),
// and stops at $2 distinct turns: the first $2 turns of the union are among
// them. So a page reads at most four times the limit of matching turns,
// whatever lies after them, rather than every unfinished turn after the
// cursor; what it reads of other accounts' turns is what lies between the
// cursor and the page's end in the partial indexes (they hold no account).
// The page's turns and the four facts are LATERAL reads, one per listed
// turn (a LIMIT keeps each from being flattened into a join): as a join,
// the planner may merge the page with the whole of turns_pkey, and, as
// EXISTS in the select list, hash each fact's partial index whole, for
// every page.
const unfinishedSQL = `SELECT t.*,
		u.found IS NOT NULL, p.found IS NOT NULL, x.found IS NOT NULL, w.found IS NOT NULL
	FROM (SELECT id FROM (
		(SELECT id FROM turns
			WHERE phase NOT IN ('delivered', 'abandoned') AND id > $1
			  AND ($3::text = '' OR account = $3::text) AND ($4::bigint = 0 OR updated_at < $4::bigint)
			ORDER BY id LIMIT $2)
		UNION
		(SELECT DISTINCT j.turn FROM journal AS j
			WHERE j.status IN ('outcome_unknown', 'needs_intervention') AND j.turn > $1
			  AND EXISTS (SELECT 1 FROM turns AS d WHERE d.id = j.turn
				AND ($3::text = '' OR d.account = $3::text) AND ($4::bigint = 0 OR d.updated_at < $4::bigint))
			ORDER BY j.turn LIMIT $2)
		UNION
		(SELECT DISTINCT j.turn FROM journal AS j
			WHERE j.status IN ('pending', 'executing') AND j.turn > $1
			  AND EXISTS (SELECT 1 FROM turns AS d WHERE d.id = j.turn
				AND (d.phase = 'delivered' OR (d.phase = 'abandoned' AND j.status = 'executing'))
				AND ($3::text = '' OR d.account = $3::text) AND ($4::bigint = 0 OR d.updated_at < $4::bigint))
			ORDER BY j.turn LIMIT $2)
		UNION
		(SELECT DISTINCT a.turn FROM journal AS a
			WHERE a.status = 'awaiting_approval' AND a.turn > $1
			  AND EXISTS (SELECT 1 FROM turns AS d WHERE d.id = a.turn AND d.phase = 'delivered'
				AND ($3::text = '' OR d.account = $3::text) AND ($4::bigint = 0 OR d.updated_at < $4::bigint))
			ORDER BY a.turn LIMIT $2)) AS parts
		ORDER BY id LIMIT $2) AS page
	CROSS JOIN LATERAL (SELECT ` + turnCols + ` FROM turns WHERE id = page.id LIMIT 1) AS t
	LEFT JOIN LATERAL (SELECT true AS found FROM journal
		WHERE turn = t.id AND status IN ('outcome_unknown', 'needs_intervention') LIMIT 1) AS u ON true
	LEFT JOIN LATERAL (SELECT true AS found FROM journal
		WHERE turn = t.id AND status IN ('pending', 'executing') LIMIT 1) AS p ON true
	LEFT JOIN LATERAL (SELECT true AS found FROM journal
		WHERE turn = t.id AND status IN ('pending', 'executing') AND status = 'executing' LIMIT 1) AS x ON true
	LEFT JOIN LATERAL (SELECT true AS found FROM journal
		WHERE turn = t.id AND status = 'awaiting_approval' LIMIT 1) AS w ON true
	ORDER BY page.id`

// ListUnfinishedTurns returns, oldest first (by turn id), at most limit
// turns in scope for which turnframe.Unfinished holds: non-terminal turns,
// turns holding an OutcomeUnknown or NeedsIntervention entry, delivered
// turns holding a pending, executing or awaiting_approval entry, and
// abandoned turns holding an executing entry. A scope's UpdatedBefore leaves
// out turns updated at or after it; its After, when not zero, every turn
// whose id does not sort after it (pass the last turn of a page to get the
// next). ErrInvalid for a bad scope (turnframe.RecoveryScope.Validate) or a
// limit outside 1–MaxLimit.
func (s *Store) ListUnfinishedTurns(ctx context.Context, scope turnframe.RecoveryScope, limit int) ([]turnframe.TurnPhaseMarker, error) {
	f, err := s.frame(ctx, "list unfinished turns")
	if err != nil {
		return nil, err
	}
	scope.UpdatedBefore = f.in(scope.UpdatedBefore)
	ms, err := s.dbListUnfinishedTurns(ctx, scope, limit)
	for i := range ms {
		ms[i] = f.markerOut(ms[i])
	}
	return ms, err
}

// dbListUnfinishedTurns is ListUnfinishedTurns on times in the store's frame (frame.go).
func (s *Store) dbListUnfinishedTurns(ctx context.Context, scope turnframe.RecoveryScope, limit int) ([]turnframe.TurnPhaseMarker, error) {
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
	rows, err := s.db.Query(ctx, unfinishedSQL, idText(scope.After), limit, string(scope.Account), before)
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
	f, err := s.frame(ctx, "for turn")
	if err != nil {
		return nil, err
	}
	es, err := s.dbForTurn(ctx, account, turn)
	return f.entriesOut(es), err
}

// dbForTurn is ForTurn on times in the store's frame (frame.go).
func (s *Store) dbForTurn(ctx context.Context, account turnframe.AccountID, turn turnframe.TurnID) ([]turnframe.JournalEntry, error) {
	if err := turnframe.CheckTurnRef(account, turn); err != nil {
		return nil, err
	}
	done, err := s.enter("for turn")
	if err != nil {
		return nil, err
	}
	defer done()
	rows, err := s.db.Query(ctx,
		`SELECT `+entryCols+` FROM journal WHERE turn = $1 AND account = $2 ORDER BY seq`, turn.String(), string(account))
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
	f, err := s.frame(ctx, "by key")
	if err != nil {
		return turnframe.JournalEntry{}, err
	}
	e, err := s.dbByKey(ctx, account, key)
	return f.entryOut(e), err
}

// dbByKey is ByKey on times in the store's frame (frame.go).
func (s *Store) dbByKey(ctx context.Context, account turnframe.AccountID, key turnframe.IdempotencyKey) (turnframe.JournalEntry, error) {
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
	e, err := scanEntry(s.db.QueryRow(ctx, `SELECT `+entryCols+` FROM journal WHERE account = $1 AND key = $2`,
		string(account), string(key)))
	if errors.Is(err, pgx.ErrNoRows) {
		err = fmt.Errorf("key %q: %w", key, turnframe.ErrNotFound)
	}
	if err != nil {
		return e, s.fail(ctx, "by key", err)
	}
	return e, nil
}

// EventsByID returns the events with these ids, in append order, each once.
// Ids that do not exist for account are simply absent. ErrInvalid for a bad
// account or a zero id.
func (s *Store) EventsByID(ctx context.Context, account turnframe.AccountID, ids []turnframe.EventID) ([]turnframe.StoredEvent, error) {
	f, err := s.frame(ctx, "events by id")
	if err != nil {
		return nil, err
	}
	evs, err := s.dbEventsByID(ctx, account, ids)
	return f.eventsOut(evs), err
}

// dbEventsByID is EventsByID on times in the store's frame (frame.go).
func (s *Store) dbEventsByID(ctx context.Context, account turnframe.AccountID, ids []turnframe.EventID) ([]turnframe.StoredEvent, error) {
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
	if len(ids) == 0 {
		return []turnframe.StoredEvent{}, nil
	}
	out, err := scanEvents(s.db.Query(ctx, `SELECT `+eventCols+` FROM events
		WHERE id = ANY($1) AND account = $2 ORDER BY seq`, texts, string(account)))
	if err != nil {
		return nil, s.fail(ctx, "events by id", err)
	}
	if out == nil {
		out = []turnframe.StoredEvent{}
	}
	return out, nil
}

// EventsSince returns at most limit events of the case with a revision
// above since, in revision order. ErrInvalid for a bad account or case, or
// a limit outside 1–MaxLimit.
func (s *Store) EventsSince(ctx context.Context, account turnframe.AccountID, c turnframe.CaseKey, since turnframe.CaseRevision, limit int) ([]turnframe.StoredEvent, error) {
	f, err := s.frame(ctx, "events since")
	if err != nil {
		return nil, err
	}
	evs, err := s.dbEventsSince(ctx, account, c, since, limit)
	return f.eventsOut(evs), err
}

// dbEventsSince is EventsSince on times in the store's frame (frame.go).
func (s *Store) dbEventsSince(ctx context.Context, account turnframe.AccountID, c turnframe.CaseKey, since turnframe.CaseRevision, limit int) ([]turnframe.StoredEvent, error) {
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
	out, err := scanEvents(s.db.Query(ctx, `SELECT `+eventCols+` FROM events
		WHERE account = $1 AND case_key = $2 AND revision > $3 ORDER BY revision LIMIT $4`,
		string(account), string(c), int64(since), limit))
	if err != nil {
		return nil, s.fail(ctx, "events since", err)
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
	rev, err := caseRevision(ctx, s.db, account, c)
	if err != nil {
		return 0, s.fail(ctx, "case revision", err)
	}
	return rev, nil
}

const caseRevisionSQL = `SELECT coalesce(max(revision), 0) FROM events WHERE account = $1 AND case_key = $2`

func caseRevision(ctx context.Context, q querier, account turnframe.AccountID, c turnframe.CaseKey) (turnframe.CaseRevision, error) {
	var rev int64
	if err := q.QueryRow(ctx, caseRevisionSQL, string(account), string(c)).Scan(&rev); err != nil {
		return 0, fmt.Errorf("revision of case %q: %w", c, err)
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
	var text *string
	err = s.db.QueryRow(ctx, `SELECT replay FROM turns WHERE id = $1 AND account = $2`, turn.String(), string(account)).Scan(&text)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return r, fmt.Errorf("pgstore: replay: turn %v: %w", turn, turnframe.ErrNotFound)
	case err != nil:
		return r, s.fail(ctx, "replay", err)
	case text == nil:
		return r, fmt.Errorf("pgstore: replay: turn %v has no replay record: %w", turn, turnframe.ErrNotFound)
	}
	if err := json.Unmarshal([]byte(*text), &r); err != nil {
		return turnframe.ReplayRecord{}, s.fail(ctx, "replay", fmt.Errorf("stored replay record: %w", err))
	}
	return r, nil
}
