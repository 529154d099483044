-- One fenced transition: only from state ?5 with token ?4. A move to
-- queued is due again after ?11 ms (a retry's backoff).
UPDATE onceonly_ops SET
    state = ?6,
    external_ref = COALESCE(?7, external_ref),
    result = COALESCE(?8, result),
    error = CASE WHEN ?6 = 'completed' THEN ?9 ELSE COALESCE(?9, error) END,
    completed_at = CASE WHEN ?6 = 'completed' THEN (CAST(unixepoch('subsec') * 1000 AS INTEGER) + ?1) ELSE completed_at END,
    lease_until = NULL,
    cancel_requested = CASE WHEN ?6 = 'queued' THEN 0 ELSE cancel_requested END,
    due_at = CASE WHEN ?6 = 'queued' THEN (CAST(unixepoch('subsec') * 1000 AS INTEGER) + ?1) + ?11 ELSE due_at END,
    updated_at = (CAST(unixepoch('subsec') * 1000 AS INTEGER) + ?1)
WHERE job_type = ?2 AND op_key = ?3 AND token = ?4 AND state = ?5
  AND (?10 = 0 OR cancel_requested = 0)
