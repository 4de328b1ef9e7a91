-- turnframe's first schema. Conventions, for anyone reading the file with the
-- sqlite3 shell: every table is STRICT; times are INTEGER Unix microseconds in
-- UTC (0 = no time); ids are 26-character ULID text; phases and statuses are
-- the snake_case names the Go types print. Each status list in a partial index
-- is written as literals: SQLite only uses a partial index for a query whose
-- WHERE clause repeats the index's condition literally.

-- +goose Up

-- turns: one row per user turn. replay is the turn's replay record as JSON
-- (NULL until a Write carries one).
CREATE TABLE turns (
    id           TEXT    NOT NULL PRIMARY KEY CHECK (length(id) = 26),
    account      TEXT    NOT NULL CHECK (length(account) BETWEEN 1 AND 128),
    conversation TEXT    NOT NULL CHECK (length(conversation) = 26),
    text         TEXT    NOT NULL,
    phase        TEXT    NOT NULL CHECK (phase IN ('received', 'interpreted', 'planned', 'executing', 'committed', 'delivered', 'abandoned')),
    replay       TEXT             CHECK (replay IS NULL OR json_valid(replay)),
    received_at  INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
) STRICT;

-- Recovery lists turns that are not terminal, oldest first: only those rows
-- are in this index, so the listing never reads delivered history.
CREATE INDEX turns_unfinished ON turns (id)
    WHERE phase NOT IN ('delivered', 'abandoned');

-- journal: one row per idempotency key an account ever used. Rows are never
-- deleted: a key must deduplicate forever. seq is admission order.
CREATE TABLE journal (
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
    UNIQUE (account, key)
) STRICT;

CREATE INDEX journal_turn ON journal (turn, seq);

-- Entries whose outcome is unknown keep their turn unfinished for recovery,
-- even a delivered one.
CREATE INDEX journal_unknown ON journal (turn)
    WHERE status = 'outcome_unknown';

-- Pending and Executing entries keep a delivered turn unfinished (a resend
-- reconciliation asked for after the answer went out).
CREATE INDEX journal_pending ON journal (turn)
    WHERE status IN ('pending', 'executing');

-- events: the event journal. seq is append order; revision counts a case's
-- events from 1.
CREATE TABLE events (
    seq      INTEGER PRIMARY KEY,
    id       TEXT    NOT NULL UNIQUE CHECK (length(id) = 26),
    account  TEXT    NOT NULL,
    case_key TEXT    NOT NULL,
    revision INTEGER NOT NULL CHECK (revision >= 1),
    turn     TEXT    NOT NULL REFERENCES turns (id),
    key      TEXT    NOT NULL,
    type     TEXT    NOT NULL,
    data     BLOB,
    at       INTEGER NOT NULL,
    UNIQUE (account, case_key, revision)
) STRICT;

-- outbox: one row per effect to send. seq is enqueue order.
CREATE TABLE outbox (
    seq         INTEGER PRIMARY KEY,
    id          TEXT    NOT NULL UNIQUE CHECK (length(id) = 26),
    account     TEXT    NOT NULL,
    turn        TEXT    NOT NULL REFERENCES turns (id),
    key         TEXT    NOT NULL,
    destination TEXT    NOT NULL,
    payload     BLOB,
    order_key   TEXT    NOT NULL,
    status      TEXT    NOT NULL CHECK (status IN ('pending', 'dispatching', 'completed', 'failed', 'outcome_unknown')),
    attempts    INTEGER NOT NULL CHECK (attempts >= 0),
    due_at      INTEGER NOT NULL,
    claimed_by  TEXT    NOT NULL,
    claimed_at  INTEGER NOT NULL,
    last_code   TEXT    NOT NULL,
    remote_ref  TEXT    NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    finished_at INTEGER NOT NULL,
    -- held: a Pending row with an earlier Pending, Dispatching or
    -- OutcomeUnknown row of its account and order key. It cannot be due, so
    -- it stays out of outbox_due: a long queue behind a blocked head costs a
    -- claim nothing. Kept by the store on enqueue, when a row stops holding
    -- its key (the next one is let go) and when a failed row is requeued.
    held        INTEGER NOT NULL DEFAULT 0 CHECK (held IN (0, 1))
) STRICT;

-- The claim reads only Pending rows that are not held, in claim order, and
-- finds in the index the account and order key its ordering probe needs.
CREATE INDEX outbox_due ON outbox (due_at, seq, account, order_key)
    WHERE status = 'pending' AND held = 0;

-- The ordering probe: the active rows of an ordered key. A query must repeat
-- both halves of this condition for SQLite to use the index.
CREATE INDEX outbox_ordered ON outbox (account, order_key, seq, status)
    WHERE order_key <> '' AND status IN ('pending', 'dispatching', 'outcome_unknown');

-- Releasing expired claims reads only Dispatching rows.
CREATE INDEX outbox_dispatching ON outbox (claimed_at)
    WHERE status = 'dispatching';

-- Pruning reads only finished rows, oldest first.
CREATE INDEX outbox_finished ON outbox (finished_at)
    WHERE status IN ('completed', 'failed');

-- +goose Down
DROP TABLE outbox;
DROP TABLE events;
DROP TABLE journal;
DROP TABLE turns;
