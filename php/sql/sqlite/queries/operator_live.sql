-- The live states counted by job type, each from its partial index (queued,
-- claimed, held), so the count costs the live rows, never the history. For
-- claims, how many are past their lease (stuck); for held rows, when the
-- oldest one's claim began.
SELECT job_type, 'queued' AS state, count(*) AS n, 0 AS stuck, NULL AS oldest
FROM onceonly_ops INDEXED BY onceonly_ops_queued
WHERE state = 'queued'
GROUP BY job_type
UNION ALL
SELECT job_type, 'claimed', count(*),
       sum(lease_until <= (CAST(unixepoch('subsec') * 1000 AS INTEGER) + ?1)), NULL
FROM onceonly_ops INDEXED BY onceonly_ops_claimed
WHERE state = 'claimed'
GROUP BY job_type
UNION ALL
SELECT job_type, 'held', count(*), 0, min(coalesce(claimed_at, created_at))
FROM onceonly_ops INDEXED BY onceonly_ops_held
WHERE state = 'held'
GROUP BY job_type
