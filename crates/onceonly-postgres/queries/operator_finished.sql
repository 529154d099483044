-- Records finished within the last $2 ms, by job type and state: index
-- ranges of ops_updated (state, updated_at).
SELECT job_type, state, count(*) AS n
FROM onceonly.ops
WHERE state IN ('completed', 'failed', 'cancelled')
  AND updated_at >= ((extract(epoch from statement_timestamp()) * 1000)::bigint + $1) - $2
GROUP BY job_type, state
