-- A release of a claim (the `retry` and `released` audit events) carries the
-- claim's attempt number and how long until the operation is due again, in
-- ms after `at`. Both are NULL on every other event.
ALTER TABLE onceonly.audit ADD COLUMN IF NOT EXISTS attempt BIGINT;
ALTER TABLE onceonly.audit ADD COLUMN IF NOT EXISTS retry_after_ms BIGINT;
