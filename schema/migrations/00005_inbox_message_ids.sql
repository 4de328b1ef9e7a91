-- The inbox: the channel's id of the message that began a turn
-- (turnframe.StoredTurn.MessageID), so that a redelivered message finds the
-- turn its first delivery began instead of beginning a second one.
-- Conventions as in 00001.
--
-- The column is added, not rebuilt: NULL for every existing turn (none was
-- received with an id) and for every turn received without one. The id
-- lives on its turn's row, so it is kept exactly as long as the turn;
-- nothing prunes turns. turns_message makes an id unique per account (NULLs
-- are left out of the index) and is how a Begin finds an earlier delivery.

-- +goose Up

ALTER TABLE turns ADD COLUMN message_id TEXT
    CHECK (message_id IS NULL OR length(message_id) BETWEEN 1 AND 255);

CREATE UNIQUE INDEX turns_message ON turns (account, message_id)
    WHERE message_id IS NOT NULL;

-- +goose Down
-- The ids go with the column: a later redelivery of a message received
-- before the Down becomes a new turn, as it did before 00005.

DROP INDEX turns_message;
ALTER TABLE turns DROP COLUMN message_id;
