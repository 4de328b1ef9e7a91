-- The trace context an outbox row was enqueued under
-- (turnframe.OutboxMessage.TraceContext): opaque text, a W3C traceparent
-- for OpenTelemetry, that the Sender gets back to link its send to the
-- request that caused it. Conventions as in 00001.
--
-- The column is added, not rebuilt: '' for every existing row (none was
-- enqueued with one) and for every row enqueued without one, so a read
-- never meets NULL. No index: nothing searches by it; the claim returns
-- it with the row. The bound is turnframe.MaxTraceContextLen, in bytes.

-- +goose Up

ALTER TABLE outbox ADD COLUMN trace_context TEXT NOT NULL DEFAULT ''
    CHECK (length(CAST(trace_context AS BLOB)) <= 512);

-- +goose Down
-- The trace contexts go with the column; the rows stay.

ALTER TABLE outbox DROP COLUMN trace_context;
