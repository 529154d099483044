-- The state condition is the finished index's, word for word (see migration
-- 0004), so this reads that index, not the whole history.
DELETE FROM onceonly_ops
WHERE (state = 'completed' OR state = 'failed' OR state = 'cancelled')
  AND (?2 IS NULL OR job_type = ?2)
  AND updated_at <= (CAST(unixepoch('subsec') * 1000 AS INTEGER) + ?1) - ?3
