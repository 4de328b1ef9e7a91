-- The status needs_intervention for journal entries and outbox rows, and the
-- audit trail (history). Conventions as in 00001: STRICT tables, INTEGER Unix
-- microseconds (0 = no time), status lists in partial indexes written as
-- literals.
--
-- SQLite cannot change a CHECK constraint, so journal and outbox are rebuilt
-- the way the SQLite documentation gives ("Making Other Kinds Of Table
-- Schema Changes"): create the new table, copy every row, drop the old one,
-- rename the new one, create every index again. Every column keeps its
-- place, type, default and constraint; only the status lists grow. Nothing
-- references journal or outbox, so dropping them changes no other table;
-- both reference turns, and with foreign_keys on (the store's writer has
-- it) every copied row is checked against it: a row whose turn is missing
-- fails the migration, which rolls back whole and leaves the file as it was.
-- seq is the rowid and is copied, so enqueue and admission order, and every
-- held mark, stay as they were.

-- +goose Up

CREATE TABLE journal_new (
    seq         INTEGER PRIMARY KEY,
    account     TEXT    NOT NULL,
    key         TEXT    NOT NULL CHECK (length(key) BETWEEN 1 AND 255),
    turn        TEXT    NOT NULL REFERENCES turns (id),
    case_key    TEXT    NOT NULL,
    name        TEXT    NOT NULL,
    payload     BLOB,
    status      TEXT    NOT NULL CHECK (status IN ('pending', 'executing', 'committed', 'rejected', 'outcome_unknown', 'needs_intervention')),
    attempt     TEXT    NOT NULL CHECK (attempt = '' OR length(attempt) = 26),
    attempts    INTEGER NOT NULL CHECK (attempts >= 0),
    event_ids   TEXT    NOT NULL CHECK (json_valid(event_ids)),
    code        TEXT    NOT NULL,
    remote_ref  TEXT    NOT NULL,
    admitted_at INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    -- while an entry is executing, when its attempt's hold on it ends; else 0
    lease_until INTEGER NOT NULL DEFAULT 0,
    UNIQUE (account, key)
) STRICT;

INSERT INTO journal_new (seq, account, key, turn, case_key, name, payload, status, attempt, attempts, event_ids,
        code, remote_ref, admitted_at, updated_at, lease_until)
    SELECT seq, account, key, turn, case_key, name, payload, status, attempt, attempts, event_ids,
        code, remote_ref, admitted_at, updated_at, lease_until
    FROM journal;

DROP TABLE journal;
ALTER TABLE journal_new RENAME TO journal;

CREATE INDEX journal_turn ON journal (turn, seq);

-- Entries whose outcome is unknown (outcome_unknown or needs_intervention)
-- keep their turn unfinished for recovery, even a delivered one.
CREATE INDEX journal_unknown ON journal (turn)
    WHERE status IN ('outcome_unknown', 'needs_intervention');

-- Pending and Executing entries keep a delivered turn unfinished (a resend
-- reconciliation asked for after the answer went out).
CREATE INDEX journal_pending ON journal (turn)
    WHERE status IN ('pending', 'executing');

CREATE TABLE outbox_new (
    seq          INTEGER PRIMARY KEY,
    id           TEXT    NOT NULL UNIQUE CHECK (length(id) = 26),
    account      TEXT    NOT NULL,
    turn         TEXT    NOT NULL REFERENCES turns (id),
    key          TEXT    NOT NULL,
    destination  TEXT    NOT NULL,
    payload      BLOB,
    order_key    TEXT    NOT NULL,
    status       TEXT    NOT NULL CHECK (status IN ('pending', 'dispatching', 'completed', 'failed', 'outcome_unknown', 'needs_intervention')),
    attempts     INTEGER NOT NULL CHECK (attempts >= 0),
    due_at       INTEGER NOT NULL,
    claimed_by   TEXT    NOT NULL,
    claimed_at   INTEGER NOT NULL,
    last_code    TEXT    NOT NULL,
    remote_ref   TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    finished_at  INTEGER NOT NULL,
    -- held: a Pending row with an earlier Pending, Dispatching,
    -- OutcomeUnknown or NeedsIntervention row of its account and order key.
    -- It cannot be due, so it stays out of outbox_due: a long queue behind a
    -- blocked head costs a claim nothing. Kept by the store on enqueue, when
    -- a row stops holding its key (the next one is let go) and when a failed
    -- row is requeued.
    held         INTEGER NOT NULL DEFAULT 0 CHECK (held IN (0, 1)),
    -- while a row is dispatching, when its claim's lease ends; else 0
    lease_until  INTEGER NOT NULL DEFAULT 0,
    -- the attempts made before the row's current attempt budget began
    attempt_base INTEGER NOT NULL DEFAULT 0 CHECK (attempt_base >= 0)
) STRICT;

INSERT INTO outbox_new (seq, id, account, turn, key, destination, payload, order_key, status, attempts, due_at,
        claimed_by, claimed_at, last_code, remote_ref, created_at, updated_at, finished_at, held, lease_until, attempt_base)
    SELECT seq, id, account, turn, key, destination, payload, order_key, status, attempts, due_at,
        claimed_by, claimed_at, last_code, remote_ref, created_at, updated_at, finished_at, held, lease_until, attempt_base
    FROM outbox;

DROP TABLE outbox;
ALTER TABLE outbox_new RENAME TO outbox;

-- The claim reads only Pending rows that are not held, in claim order, and
-- finds in the index the account and order key its ordering probe needs.
CREATE INDEX outbox_due ON outbox (due_at, seq, account, order_key)
    WHERE status = 'pending' AND held = 0;

-- The ordering probe: the rows of an ordered key that hold it (HoldsOrder).
-- A query must repeat both halves of this condition, the status list
-- literally, for SQLite to use the index.
CREATE INDEX outbox_ordered ON outbox (account, order_key, seq, status)
    WHERE order_key <> '' AND status IN ('pending', 'dispatching', 'outcome_unknown', 'needs_intervention');

-- Pruning reads only finished rows, oldest first.
CREATE INDEX outbox_finished ON outbox (finished_at)
    WHERE status IN ('completed', 'failed');

-- Expiring ended leases reads only Dispatching rows, by lease end.
CREATE INDEX outbox_leases ON outbox (lease_until)
    WHERE status = 'dispatching';

-- One row per (account, key).
CREATE UNIQUE INDEX outbox_key ON outbox (account, key);

-- history: the audit trail, one row per move of a journal entry, an outbox
-- row or a turn's phase, written in the transaction that made it, and per
-- piece of evidence (from_status = to_status, evidence 1). seq is the
-- rowid: store-wide, increasing, and the cheapest number SQLite hands out
-- (the end of the table's b-tree). The subject is kind, account and ref
-- (the entry's key, or the row's or turn's 26-character id); from_status
-- and to_status are status names (a turn's phase names), from_status '' for
-- a subject's creation. Journal and turn history is never deleted; an
-- outbox row's goes with the row when Prune deletes it.
CREATE TABLE history (
    seq         INTEGER PRIMARY KEY,
    kind        TEXT    NOT NULL CHECK (kind IN ('journal', 'outbox', 'turn')),
    account     TEXT    NOT NULL,
    ref         TEXT    NOT NULL,
    from_status TEXT    NOT NULL,
    to_status   TEXT    NOT NULL,
    evidence    INTEGER NOT NULL CHECK (evidence IN (0, 1)),
    attempt     TEXT    NOT NULL,
    actor       TEXT    NOT NULL,
    code        TEXT    NOT NULL,
    remote_ref  TEXT    NOT NULL,
    note        TEXT    NOT NULL,
    at          INTEGER NOT NULL
) STRICT;

-- A subject's records in seq order: the index ends with the rowid, seq.
-- The reference leads the kind, so the records of a turn and of the outbox
-- rows it enqueues, ids of about the same time, share index pages.
CREATE INDEX history_subject ON history (account, ref, kind);

-- +goose Down
-- The tables go back to the 00002 status lists and indexes. A file holding a
-- needs_intervention entry or row cannot: its copy fails the CHECK and the
-- whole step rolls back, for a Down must not lose what a person has to settle.
DROP TABLE history;

CREATE TABLE journal_new (
    seq         INTEGER PRIMARY KEY,
    account     TEXT    NOT NULL,
    key         TEXT    NOT NULL CHECK (length(key) BETWEEN 1 AND 255),
    turn        TEXT    NOT NULL REFERENCES turns (id),
    case_key    TEXT    NOT NULL,
    name        TEXT    NOT NULL,
    payload     BLOB,
    status      TEXT    NOT NULL CHECK (status IN ('pending', 'executing', 'committed', 'rejected', 'outcome_unknown')),
    attempt     TEXT    NOT NULL CHECK (attempt = '' OR length(attempt) = 26),
    attempts    INTEGER NOT NULL CHECK (attempts >= 0),
    event_ids   TEXT    NOT NULL CHECK (json_valid(event_ids)),
    code        TEXT    NOT NULL,
    remote_ref  TEXT    NOT NULL,
    admitted_at INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    lease_until INTEGER NOT NULL DEFAULT 0,
    UNIQUE (account, key)
) STRICT;

INSERT INTO journal_new (seq, account, key, turn, case_key, name, payload, status, attempt, attempts, event_ids,
        code, remote_ref, admitted_at, updated_at, lease_until)
    SELECT seq, account, key, turn, case_key, name, payload, status, attempt, attempts, event_ids,
        code, remote_ref, admitted_at, updated_at, lease_until
    FROM journal;

DROP TABLE journal;
ALTER TABLE journal_new RENAME TO journal;

CREATE INDEX journal_turn ON journal (turn, seq);

CREATE INDEX journal_unknown ON journal (turn)
    WHERE status = 'outcome_unknown';

CREATE INDEX journal_pending ON journal (turn)
    WHERE status IN ('pending', 'executing');

CREATE TABLE outbox_new (
    seq          INTEGER PRIMARY KEY,
    id           TEXT    NOT NULL UNIQUE CHECK (length(id) = 26),
    account      TEXT    NOT NULL,
    turn         TEXT    NOT NULL REFERENCES turns (id),
    key          TEXT    NOT NULL,
    destination  TEXT    NOT NULL,
    payload      BLOB,
    order_key    TEXT    NOT NULL,
    status       TEXT    NOT NULL CHECK (status IN ('pending', 'dispatching', 'completed', 'failed', 'outcome_unknown')),
    attempts     INTEGER NOT NULL CHECK (attempts >= 0),
    due_at       INTEGER NOT NULL,
    claimed_by   TEXT    NOT NULL,
    claimed_at   INTEGER NOT NULL,
    last_code    TEXT    NOT NULL,
    remote_ref   TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    finished_at  INTEGER NOT NULL,
    held         INTEGER NOT NULL DEFAULT 0 CHECK (held IN (0, 1)),
    lease_until  INTEGER NOT NULL DEFAULT 0,
    attempt_base INTEGER NOT NULL DEFAULT 0 CHECK (attempt_base >= 0)
) STRICT;

INSERT INTO outbox_new (seq, id, account, turn, key, destination, payload, order_key, status, attempts, due_at,
        claimed_by, claimed_at, last_code, remote_ref, created_at, updated_at, finished_at, held, lease_until, attempt_base)
    SELECT seq, id, account, turn, key, destination, payload, order_key, status, attempts, due_at,
        claimed_by, claimed_at, last_code, remote_ref, created_at, updated_at, finished_at, held, lease_until, attempt_base
    FROM outbox;

DROP TABLE outbox;
ALTER TABLE outbox_new RENAME TO outbox;

CREATE INDEX outbox_due ON outbox (due_at, seq, account, order_key)
    WHERE status = 'pending' AND held = 0;

CREATE INDEX outbox_ordered ON outbox (account, order_key, seq, status)
    WHERE order_key <> '' AND status IN ('pending', 'dispatching', 'outcome_unknown');

CREATE INDEX outbox_finished ON outbox (finished_at)
    WHERE status IN ('completed', 'failed');

CREATE INDEX outbox_leases ON outbox (lease_until)
    WHERE status = 'dispatching';

CREATE UNIQUE INDEX outbox_key ON outbox (account, key);
