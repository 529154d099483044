-- Records finished within the last window (ms), by job type and state.
-- Binds: offset, window ms.
SELECT CAST(o.job_type AS CHAR) AS job_type, o.state, COUNT(*) AS n
FROM onceonly_ops AS o
JOIN (SELECT CAST(FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000) AS SIGNED) + ? AS now) AS c
WHERE o.state IN ('completed', 'failed', 'cancelled')
  AND o.updated_at >= c.now - ?
GROUP BY o.job_type, o.state
