-- Claim the oldest due queued rows. SKIP LOCKED: two relays never wait on
-- each other's rows, and never get the same one (the update re-checks the
-- state on the row it locked).
-- The pick is a MATERIALIZED CTE so it runs exactly once: as a subquery in
-- the UPDATE's FROM, the planner could rescan it once per queued row (nested
-- loop, no statistics yet), each rescan skipping the rows it had just claimed
-- and locking more, so LIMIT 1 claimed the whole queue.
-- The update takes the locked rows by their tuple ids (`ctid = ANY(ARRAY(..))`,
-- one TID scan, whatever the statistics say). Joined to the CTE instead, the
-- planner hashed every queued row of the table, of every job type, on every
-- claim. The ids are stable: the rows stay locked until the statement commits.
WITH due AS MATERIALIZED (
    SELECT ctid FROM onceonly.ops AS q
    WHERE q.job_type = $2 AND q.state = 'queued' AND q.due_at <= ((extract(epoch from statement_timestamp()) * 1000)::bigint + $1)
    ORDER BY q.due_at
    LIMIT $5::bigint
    FOR UPDATE SKIP LOCKED
)
UPDATE onceonly.ops SET
    state = 'claimed', token = ops.token + 1, owner = $3, attempts = ops.attempts + 1,
    claimed_at = ((extract(epoch from statement_timestamp()) * 1000)::bigint + $1), lease_until = ((extract(epoch from statement_timestamp()) * 1000)::bigint + $1) + $4::bigint, updated_at = ((extract(epoch from statement_timestamp()) * 1000)::bigint + $1)
WHERE ops.ctid = ANY(ARRAY(SELECT ctid FROM due))
  AND ops.job_type = $2
  AND ops.state = 'queued'
RETURNING ops.*
