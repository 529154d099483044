-- The live states counted by job type, one arm per state (each reads the
-- index of (job_type, state, …)): the count costs the live rows, never the
-- history. For claims, how many are past their lease (stuck); for held
-- rows, when the oldest one's claim began. Binds: offset.
SELECT CAST(job_type AS CHAR) AS job_type, 'queued' AS state, COUNT(*) AS n, CAST(0 AS SIGNED) AS stuck,
       CAST(NULL AS SIGNED) AS oldest
FROM onceonly_ops WHERE state = 'queued' GROUP BY job_type
UNION ALL
SELECT CAST(o.job_type AS CHAR) AS job_type, 'claimed', COUNT(*), CAST(SUM(o.lease_until <= c.now) AS SIGNED), NULL
FROM onceonly_ops AS o
JOIN (SELECT CAST(FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000) AS SIGNED) + ? AS now) AS c
WHERE o.state = 'claimed' GROUP BY o.job_type
UNION ALL
SELECT CAST(job_type AS CHAR) AS job_type, 'held', COUNT(*), 0, MIN(COALESCE(claimed_at, created_at))
FROM onceonly_ops WHERE state = 'held' GROUP BY job_type
