-- One page of held operations (?2: one job type, or all when NULL), oldest
-- claim first. The partial index holds only held rows, so the sort costs
-- the held rows, never the history. ?3: page size (-1: all), ?4: rows skipped.
SELECT * FROM onceonly_ops INDEXED BY onceonly_ops_held
WHERE state = 'held' AND (?2 IS NULL OR job_type = ?2)
ORDER BY coalesce(claimed_at, created_at), job_type, op_key
LIMIT ?3 OFFSET ?4
