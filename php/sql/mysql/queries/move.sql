-- One fenced transition: only from state `from` with the token. A move to
-- queued is due again after the retry delay (ms). Bumps the version, so a
-- matched row is a changed row (found rows or not).
-- Binds: offset, to, external_ref, result, error, retry ms,
--        job_type, op_key, token, from, unless_cancel_requested.
UPDATE onceonly_ops AS o
JOIN (SELECT CAST(FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000) AS SIGNED) + ? AS now,
             ? AS to_state, ? AS external_ref, ? AS result, ? AS error, ? AS retry_after) AS m
SET o.state = m.to_state,
    o.version = o.version + 1,
    o.external_ref = COALESCE(m.external_ref, o.external_ref),
    o.result = COALESCE(m.result, o.result),
    o.error = CASE WHEN m.to_state = 'completed' THEN m.error ELSE COALESCE(m.error, o.error) END,
    o.completed_at = CASE WHEN m.to_state = 'completed' THEN m.now ELSE o.completed_at END,
    o.lease_until = NULL,
    o.cancel_requested = CASE WHEN m.to_state = 'queued' THEN false ELSE o.cancel_requested END,
    o.due_at = CASE WHEN m.to_state = 'queued' THEN m.now + m.retry_after ELSE o.due_at END,
    o.updated_at = m.now
WHERE o.job_type = ? AND o.op_key = ? AND o.token = ? AND o.state = ?
  AND (NOT ? OR NOT o.cancel_requested)
