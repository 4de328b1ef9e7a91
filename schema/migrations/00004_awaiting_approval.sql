-- The journal status awaiting_approval (a command admitted for a person to
-- approve or deny before it runs) and the column needs_approval, the
-- command's Command.NeedsApproval as admitted. Conventions as in 00001.
--
-- SQLite cannot change a CHECK constraint, so journal is rebuilt as 00003
-- rebuilt it: create the new table, copy every row (seq included, so the
-- admission order stays), drop the old one, rename the new one, create
-- every index again. Every column keeps its place, type, default and
-- constraint; the status list grows by one and needs_approval is added
-- last, 0 for every existing row (none of them needed approval). Nothing
-- references journal; it references turns, and with foreign_keys on every
-- copied row is checked against it: a row whose turn is missing fails the
-- migration, which rolls back whole. outbox and history are not touched.

-- +goose Up

-- A guard: this migration must fail on a file that already has it. goose
-- takes no lock on SQLite, so two processes opening an old file at once can
-- both list it as pending, and the second runs it after the first
-- committed it; every statement below would then succeed again and reset
-- needs_approval to 0 on every row. On the first run this column is added
-- to the old table and dropped with it; on a second run it exists, the
-- migration fails and rolls back, and Open runs Up again, which finds it
-- applied (sqlitestore's migrateAttempts).
ALTER TABLE journal ADD COLUMN needs_approval INTEGER NOT NULL DEFAULT 0;

CREATE TABLE journal_new (
    seq            INTEGER PRIMARY KEY,
    account        TEXT    NOT NULL,
    key            TEXT    NOT NULL CHECK (length(key) BETWEEN 1 AND 255),
    turn           TEXT    NOT NULL REFERENCES turns (id),
    case_key       TEXT    NOT NULL,
    name           TEXT    NOT NULL,
    payload        BLOB,
    status         TEXT    NOT NULL CHECK (status IN ('pending', 'executing', 'committed', 'rejected', 'outcome_unknown', 'needs_intervention', 'awaiting_approval')),
    attempt        TEXT    NOT NULL CHECK (attempt = '' OR length(attempt) = 26),
    attempts       INTEGER NOT NULL CHECK (attempts >= 0),
    event_ids      TEXT    NOT NULL CHECK (json_valid(event_ids)),
    code           TEXT    NOT NULL,
    remote_ref     TEXT    NOT NULL,
    admitted_at    INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL,
    -- while an entry is executing, when its attempt's hold on it ends; else 0
    lease_until    INTEGER NOT NULL DEFAULT 0,
    -- 1 for a command admitted to wait for approval (Command.NeedsApproval)
    needs_approval INTEGER NOT NULL DEFAULT 0 CHECK (needs_approval IN (0, 1)),
    UNIQUE (account, key)
) STRICT;

INSERT INTO journal_new (seq, account, key, turn, case_key, name, payload, status, attempt, attempts, event_ids,
        code, remote_ref, admitted_at, updated_at, lease_until, needs_approval)
    SELECT seq, account, key, turn, case_key, name, payload, status, attempt, attempts, event_ids,
        code, remote_ref, admitted_at, updated_at, lease_until, 0
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

-- Entries awaiting approval keep a delivered turn unfinished (recovery
-- lists them) and are what 'turnframe approvals' lists.
CREATE INDEX journal_awaiting ON journal (turn)
    WHERE status = 'awaiting_approval';

-- +goose Down
-- journal goes back to the 00003 status list, without needs_approval. A
-- file holding an awaiting_approval entry cannot: its copy fails the CHECK
-- and the whole step rolls back, for a Down must not lose what waits for a
-- person. Of an entry already approved or denied, needs_approval is dropped
-- (its history keeps the approval).

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
    WHERE status IN ('outcome_unknown', 'needs_intervention');

CREATE INDEX journal_pending ON journal (turn)
    WHERE status IN ('pending', 'executing');
