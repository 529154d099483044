-- The live states counted by job type, one arm per state so that each
-- reads the partial index holding just that state's rows (queued, live
-- claims, held): the count costs the live rows, never the history. For
-- claims, how many are past their lease (stuck); for held rows, when the
-- oldest one's claim began.
SELECT job_type, 'queued' AS state, count(*) AS n, 0::bigint AS stuck, NULL::bigint AS oldest
FROM onceonly.ops WHERE state = 'queued' GROUP BY job_type
UNION ALL
SELECT job_type, 'claimed', count(*),
       count(*) FILTER (WHERE lease_until <= ((extract(epoch from statement_timestamp()) * 1000)::bigint + $1)),
       NULL
FROM onceonly.ops WHERE state = 'claimed' GROUP BY job_type
UNION ALL
SELECT job_type, 'held', count(*), 0, min(coalesce(claimed_at, created_at))
FROM onceonly.ops WHERE state = 'held' GROUP BY job_type
