SELECT * FROM onceonly_ops
WHERE (?2 IS NULL OR job_type = ?2)
  AND (?3 IS NULL OR state = ?3)
  AND (?4 = 0 OR (state = 'claimed' AND lease_until <= (CAST(unixepoch('subsec') * 1000 AS INTEGER) + ?1)))
ORDER BY updated_at, job_type, op_key
LIMIT ?5
