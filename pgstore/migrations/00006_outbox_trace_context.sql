-- Step 6: the trace context an outbox row was enqueued under
-- (turnframe.OutboxMessage.TraceContext): opaque text, a W3C traceparent
-- for OpenTelemetry, that the Sender gets back to link its send to the
-- request that caused it. Conventions as in 00001.
--
-- '' for every existing row and every row enqueued without one, so a read
-- never meets NULL; with a constant default, PostgreSQL adds the column
-- without rewriting the table. No index: nothing searches by it. The bound
-- is turnframe.MaxTraceContextLen, in bytes.

-- +goose Up

ALTER TABLE outbox ADD COLUMN trace_context text NOT NULL DEFAULT ''
    CHECK (octet_length(trace_context) <= 512);

-- +goose Down

ALTER TABLE outbox DROP COLUMN trace_context;
