-- Move a claim whose lease is over to a new token, in the state the policy
-- chose (claimed, held or failed). Changes the token: 1 means taken.
-- Binds: offset, to, owner, to, to, lease ms, reason, job_type, op_key, stale token.
UPDATE onceonly_ops AS o
JOIN (SELECT CAST(FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000) AS SIGNED) + ? AS now, ? AS to_state) AS c
SET o.token = o.token + 1,
    o.version = o.version + 1,
    o.state = c.to_state,
    o.owner = ?,
    o.attempts = o.attempts + (CASE WHEN c.to_state = 'claimed' THEN 1 ELSE 0 END),
    o.claimed_at = CASE WHEN c.to_state = 'claimed' THEN c.now ELSE o.claimed_at END,
    o.lease_until = CASE WHEN c.to_state = 'claimed' THEN c.now + ? ELSE NULL END,
    o.error = ?,
    o.updated_at = c.now
WHERE o.job_type = ? AND o.op_key = ? AND o.state = 'claimed' AND o.token = ?
  AND o.lease_until <= c.now
