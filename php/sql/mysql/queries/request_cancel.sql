-- Mark a live claim cancel-requested. Bumps the version: a second request
-- counts 1 too, as on the other databases. Binds: offset, job_type, op_key, token.
UPDATE onceonly_ops AS o
JOIN (SELECT CAST(FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000) AS SIGNED) + ? AS now) AS c
SET o.cancel_requested = true, o.version = o.version + 1, o.updated_at = c.now
WHERE o.job_type = ? AND o.op_key = ? AND o.token = ? AND o.state = 'claimed'
