-- The live claims of one job type, or only those whose lease is over (?4:
-- the relay's stale sweep): the partial index onceonly_ops_claimed holds
-- just these, where list.sql would scan the whole history (INDEXED BY:
-- without statistics the planner would walk the job type's primary key).
SELECT * FROM onceonly_ops INDEXED BY onceonly_ops_claimed
WHERE job_type = ?2 AND state = 'claimed'
  AND (?4 = 0 OR lease_until <= (CAST(unixepoch('subsec') * 1000 AS INTEGER) + ?1))
ORDER BY updated_at, job_type, op_key
LIMIT ?5
