-- Renew a live claim's lease. Bumps the version: a renewal within the same
-- millisecond still counts 1. Binds: offset, lease ms, job_type, op_key, token.
UPDATE onceonly_ops AS o
JOIN (SELECT CAST(FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000) AS SIGNED) + ? AS now) AS c
SET o.lease_until = c.now + ?, o.version = o.version + 1, o.updated_at = c.now
WHERE o.job_type = ? AND o.op_key = ? AND o.token = ? AND o.state = 'claimed'
