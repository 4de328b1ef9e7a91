-- Step 7: partial indexes of the outbox rows whose send is uncertain, one
-- per status, in enqueue order. Conventions as in 00001.
--
-- Dispatcher.Run's release (every PollInterval) and every Recover list the
-- outcome_unknown rows, and Recover the needs_intervention ones
-- (ListOutbox by status, ORDER BY seq). Without these indexes that listing
-- read the outbox in seq order, filtering out every finished row kept, so
-- its cost grew with them. Now it reads only the rows of its status,
-- already in seq order. The listing writes its status as a literal
-- (listOutboxSQL): a generic plan of status = $1 could not prove a partial
-- index's condition. One index per status, as sqlitestore's 00007 has
-- them.
--
-- Only indexes are added: no row, column or table changes. CREATE INDEX
-- (not CONCURRENTLY: a migration is one transaction) blocks writes to the
-- outbox while it reads the table once.

-- +goose Up

-- The rows whose outcome is unknown, for the policy to resolve.
CREATE INDEX outbox_unknown ON outbox (seq)
    WHERE status = 'outcome_unknown';

-- The rows that need a person, for Recover's report.
CREATE INDEX outbox_intervention ON outbox (seq)
    WHERE status = 'needs_intervention';

-- +goose Down

DROP INDEX outbox_intervention;
DROP INDEX outbox_unknown;
