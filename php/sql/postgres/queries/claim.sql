-- Insert the record claimed, or claim it if it is queued, due and carries the
-- same payload. No row returned: someone else has it (read it and decide).
INSERT INTO onceonly.ops AS ops (job_type, op_key, state, token, owner, attempts, fingerprint,
                                 payload, claimed_at, lease_until, created_at, updated_at)
VALUES ($2, $3, 'claimed', 1, $4, 1, $5, $6, ((extract(epoch from statement_timestamp()) * 1000)::bigint + $1), ((extract(epoch from statement_timestamp()) * 1000)::bigint + $1) + $7::bigint, ((extract(epoch from statement_timestamp()) * 1000)::bigint + $1), ((extract(epoch from statement_timestamp()) * 1000)::bigint + $1))
ON CONFLICT (job_type, op_key) DO UPDATE SET
    state = 'claimed', token = ops.token + 1, owner = excluded.owner, attempts = ops.attempts + 1,
    claimed_at = excluded.claimed_at, lease_until = excluded.lease_until,
    updated_at = excluded.updated_at
WHERE ops.state = 'queued'
  AND ops.fingerprint = excluded.fingerprint
  AND (ops.due_at IS NULL OR ops.due_at <= excluded.claimed_at)
RETURNING token, attempts, claimed_at, lease_until
