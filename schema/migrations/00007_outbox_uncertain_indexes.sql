-- Partial indexes of the outbox rows whose send is uncertain, one per
-- status, in enqueue order. Conventions as in 00001.
--
-- Dispatcher.Run's release (every PollInterval) and every Recover list the
-- outcome_unknown rows, and Recover the needs_intervention ones
-- (ListOutbox by status, ORDER BY seq). Without these indexes that listing
-- read the whole outbox, every payload's overflow pages included (payload
-- comes before status), so its cost grew with every finished row kept.
-- Now it reads only the rows of its status, already in seq order.
--
-- One index per status, not one over both: SQLite uses a partial index
-- only for a query whose WHERE clause implies the index's condition, and
-- it does not find that status = 'outcome_unknown' implies status IN
-- ('outcome_unknown', 'needs_intervention'). The listing writes its status
-- as a literal (sqlitestore's listOutboxSQL) to match the condition here.
--
-- Only indexes are added: no row, column or table changes. Building them
-- reads the outbox once, in this migration's transaction. A second run (two
-- processes opening one version-6 file at once, as 00004 describes) fails
-- on the first CREATE INDEX, the index being there, and rolls back; Open
-- runs Up again, which finds the migration applied.

-- +goose Up

-- The rows whose outcome is unknown, for the policy to resolve.
CREATE INDEX outbox_unknown ON outbox (seq)
    WHERE status = 'outcome_unknown';

-- The rows that need a person, for Recover's report.
CREATE INDEX outbox_intervention ON outbox (seq)
    WHERE status = 'needs_intervention';

-- +goose Down
-- The listing reads the whole outbox again; every row stays.

DROP INDEX outbox_intervention;
DROP INDEX outbox_unknown;
