-- The queued rows of one job type: the partial index onceonly_ops_queued
-- holds just these, where list.sql would scan the whole history (INDEXED BY,
-- as in list_claimed.sql).
SELECT * FROM onceonly_ops INDEXED BY onceonly_ops_queued
WHERE job_type = ?2 AND state = 'queued'
ORDER BY updated_at, job_type, op_key
LIMIT ?5
