-- Records finished within the last $2 ms, by job type and state: a range
-- of the index of finished rows by update time (its condition repeated
-- word for word, so the planner matches it).
SELECT job_type, state, count(*) AS n
FROM onceonly.ops
WHERE state IN ('completed', 'failed', 'cancelled')
  AND updated_at >= ((extract(epoch from statement_timestamp()) * 1000)::bigint + $1) - $2::bigint
GROUP BY job_type, state
