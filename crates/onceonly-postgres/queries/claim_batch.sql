-- Claim the oldest due queued rows. SKIP LOCKED: two relays never wait on
-- each other's rows, and never get the same one (the update re-checks the
-- state on the row it locked).
-- The pick is a MATERIALIZED CTE so it runs exactly once: as a subquery in
-- the UPDATE's FROM, the planner could rescan it once per queued row (nested
-- loop, no statistics yet), each rescan skipping the rows it had just claimed
-- and locking more, so LIMIT 1 claimed the whole queue.
WITH due AS MATERIALIZED (
    SELECT job_type, op_key FROM onceonly.ops AS q
    WHERE q.job_type = $2 AND q.state = 'queued' AND q.due_at <= ((extract(epoch from statement_timestamp()) * 1000)::bigint + $1)
    ORDER BY q.due_at
    LIMIT $5::bigint
    FOR UPDATE SKIP LOCKED
)
UPDATE onceonly.ops SET
    state = 'claimed', token = ops.token + 1, owner = $3, attempts = ops.attempts + 1,
    claimed_at = ((extract(epoch from statement_timestamp()) * 1000)::bigint + $1), lease_until = ((extract(epoch from statement_timestamp()) * 1000)::bigint + $1) + $4::bigint, updated_at = ((extract(epoch from statement_timestamp()) * 1000)::bigint + $1)
FROM due
WHERE ops.job_type = due.job_type AND ops.op_key = due.op_key
  AND ops.state = 'queued'
RETURNING ops.*
