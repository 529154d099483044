-- Records finished within the last ?2 ms, by job type and state, read
-- through the partial index of finished rows by update time (its condition
-- repeated word for word, so the planner matches it).
SELECT job_type, state, count(*) AS n
FROM onceonly_ops INDEXED BY onceonly_ops_finished
WHERE (state = 'completed' OR state = 'failed' OR state = 'cancelled')
  AND updated_at >= (CAST(unixepoch('subsec') * 1000 AS INTEGER) + ?1) - ?2
GROUP BY job_type, state
