DELETE FROM onceonly_ops
WHERE state IN ('completed', 'failed', 'cancelled')
  AND (?2 IS NULL OR job_type = ?2)
  AND updated_at <= (CAST(unixepoch('subsec') * 1000 AS INTEGER) + ?1) - ?3
