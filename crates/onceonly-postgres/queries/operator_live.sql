-- The live states counted by job type, each an index range of ops_updated
-- (state, updated_at) by state, so the count costs the live rows, never the
-- history. For claims, how many are past their lease (stuck); for held
-- rows, when the oldest one's claim began.
SELECT job_type, state, count(*) AS n,
       count(*) FILTER (WHERE state = 'claimed'
           AND lease_until <= ((extract(epoch from statement_timestamp()) * 1000)::bigint + $1)) AS stuck,
       min(coalesce(claimed_at, created_at)) FILTER (WHERE state = 'held') AS oldest
FROM onceonly.ops
WHERE state IN ('queued', 'claimed', 'held')
GROUP BY job_type, state
