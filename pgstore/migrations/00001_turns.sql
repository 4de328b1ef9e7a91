-- turnframe's PostgreSQL schema, step 1: turns. Conventions, for every step:
--
-- * Times are bigint Unix microseconds in UTC, 0 meaning "no time", exactly
--   as in the SQLite store (schema/migrations). Not timestamptz: the contract
--   (DESIGN.md section 3) keeps times as integer microseconds between MinTime
--   and MaxTime with 0 as "no time"; a bigint holds every one of them as the
--   Go code computes it, compares like the Go rules compare (LeaseEnded, due
--   times), needs no NULL for "no time" and no time zone on the way in or
--   out, and reads the same in both stores for operator tools. The database
--   clock of phase 2 converts once: (extract(epoch FROM clock_timestamp())
--   * 1000000)::bigint.
-- * Ids are 26-character ULID text in the "C" collation, so that ORDER BY id
--   and id > cursor are byte order, as ULIDs sort, whatever the database's
--   collation.
-- * Statuses and phases are the snake_case names the Go types print, checked
--   by CHECK constraints; every column is NOT NULL unless NULL means
--   something (no replay record, no message id, a nil payload).
-- * Lengths are checked in bytes (octet_length), as the Go validation counts.

-- +goose Up

-- turns: one row per user turn. replay is the turn's replay record as JSON
-- text (json, not jsonb: kept as written), NULL until a Write carries one.
-- message_id is the channel's id of the message that began the turn (the
-- inbox), NULL for a turn received without one.
CREATE TABLE turns (
    id           text   COLLATE "C" NOT NULL PRIMARY KEY CHECK (length(id) = 26),
    account      text   NOT NULL CHECK (octet_length(account) BETWEEN 1 AND 128),
    conversation text   COLLATE "C" NOT NULL CHECK (length(conversation) = 26),
    text         text   NOT NULL,
    phase        text   NOT NULL CHECK (phase IN ('received', 'interpreted', 'planned', 'executing', 'committed', 'delivered', 'abandoned')),
    replay       text            CHECK (replay IS NULL OR json_typeof(replay::json) IS NOT NULL),
    received_at  bigint NOT NULL CHECK (received_at >= 0),
    updated_at   bigint NOT NULL CHECK (updated_at >= 0),
    message_id   text            CHECK (message_id IS NULL OR octet_length(message_id) BETWEEN 1 AND 255)
);

-- Recovery lists turns that are not terminal, oldest first: only those rows
-- are in this index, so the listing never reads delivered history.
CREATE INDEX turns_unfinished ON turns (id)
    WHERE phase NOT IN ('delivered', 'abandoned');

-- One turn per message id and account: the arbiter of a Begin's
-- INSERT ... ON CONFLICT, so two deliveries racing begin one turn.
CREATE UNIQUE INDEX turns_message ON turns (account, message_id)
    WHERE message_id IS NOT NULL;

-- +goose Down
DROP TABLE turns;
