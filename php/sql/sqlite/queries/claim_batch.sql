-- SQLite has one writer at a time, so a conditional update of the oldest due
-- rows cannot hand one row to two relays.
UPDATE onceonly_ops SET
    state = 'claimed', token = token + 1, owner = ?3, attempts = attempts + 1,
    claimed_at = (CAST(unixepoch('subsec') * 1000 AS INTEGER) + ?1), lease_until = (CAST(unixepoch('subsec') * 1000 AS INTEGER) + ?1) + ?4, updated_at = (CAST(unixepoch('subsec') * 1000 AS INTEGER) + ?1)
WHERE state = 'queued'
  AND (job_type, op_key) IN (
      SELECT job_type, op_key FROM onceonly_ops
      WHERE job_type = ?2 AND state = 'queued' AND due_at <= (CAST(unixepoch('subsec') * 1000 AS INTEGER) + ?1)
      ORDER BY due_at
      LIMIT ?5)
RETURNING *
