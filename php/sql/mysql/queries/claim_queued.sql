-- Claim one row claim_batch_pick.sql locked, re-checking that it is queued.
-- Changes state and token: 1 claimed. Binds: offset, owner, lease ms, job_type, op_key.
UPDATE onceonly_ops AS o
JOIN (SELECT CAST(FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000) AS SIGNED) + ? AS now) AS c
SET o.state = 'claimed', o.token = o.token + 1, o.version = o.version + 1, o.owner = ?,
    o.attempts = o.attempts + 1, o.claimed_at = c.now, o.lease_until = c.now + ?,
    o.updated_at = c.now
WHERE o.job_type = ? AND o.op_key = ? AND o.state = 'queued'
