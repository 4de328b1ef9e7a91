-- Leases for outbox claims and journal attempts, the attempt budget of a
-- requeued row, and one outbox row per (account, key). Conventions as in
-- 00001: STRICT tables, INTEGER Unix microseconds (0 = no time), status
-- lists in partial indexes written as literals.

-- +goose Up

-- outbox.lease_until: while a row is dispatching, when its claim's lease
-- ends; 0 in every other status. Only a row whose lease ended is released.
ALTER TABLE outbox ADD COLUMN lease_until INTEGER NOT NULL DEFAULT 0;

-- outbox.attempt_base: the attempts made before the row's current attempt
-- budget began (0, or its attempts when it was last requeued).
ALTER TABLE outbox ADD COLUMN attempt_base INTEGER NOT NULL DEFAULT 0 CHECK (attempt_base >= 0);

-- journal.lease_until: while an entry is executing, when its attempt's hold
-- on it ends; 0 otherwise. An entry executing when this migration runs keeps
-- 0: its hold has ended, as the old rules had it.
ALTER TABLE journal ADD COLUMN lease_until INTEGER NOT NULL DEFAULT 0;

-- A claim made before leases existed is leased for ten minutes from when it
-- was made: the old default configuration could hold a claim for 16 sends
-- of 30 s each, so a shorter lease could release a row still being sent.
UPDATE outbox SET lease_until = claimed_at + 600000000
    WHERE status = 'dispatching';

-- Releasing ended leases reads only Dispatching rows, by lease end.
DROP INDEX outbox_dispatching;
CREATE INDEX outbox_leases ON outbox (lease_until)
    WHERE status = 'dispatching';

-- Row keys become unique per account. The old key scheme gave the rows of a
-- command that enqueued several "k/1", "k/2", …, which a different command
-- keyed "k/1" collided with: a file may already hold two rows of one account
-- with one key, the very bug. Every row is kept: each later duplicate (by
-- enqueue order) is renamed "<key>~dup<seq>". '~' is now reserved (no
-- command key may contain it), so no command can ever produce that key, and
-- seq makes each renamed key distinct. (Should an old command key have been
-- spelled exactly like a renamed key, the index below fails and the whole
-- migration rolls back, leaving the file as it was.)
-- The window numbers each key's rows in one sort of the table (a correlated
-- probe without an index on the key would read the table once per row).
UPDATE outbox SET key = key || '~dup' || seq
    WHERE seq IN (SELECT seq FROM (
        SELECT seq, row_number() OVER (PARTITION BY account, key ORDER BY seq) AS n FROM outbox)
        WHERE n > 1);

CREATE UNIQUE INDEX outbox_key ON outbox (account, key);

-- +goose Down
DROP INDEX outbox_key;
DROP INDEX outbox_leases;
CREATE INDEX outbox_dispatching ON outbox (claimed_at)
    WHERE status = 'dispatching';
ALTER TABLE journal DROP COLUMN lease_until;
ALTER TABLE outbox DROP COLUMN attempt_base;
ALTER TABLE outbox DROP COLUMN lease_until;
