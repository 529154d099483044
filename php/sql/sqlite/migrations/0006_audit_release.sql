-- A release of a claim (the `retry` and `released` audit events) carries the
-- claim's attempt number and how long until the operation is due again, in
-- ms after `at`. Both are NULL on every other event.
ALTER TABLE onceonly_audit ADD COLUMN attempt INTEGER;
ALTER TABLE onceonly_audit ADD COLUMN retry_after_ms INTEGER;
