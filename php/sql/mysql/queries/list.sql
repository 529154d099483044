-- Records, oldest update first. Binds: offset, job_type (NULL: all), same,
-- state (NULL: all), same, lease expired only, limit (NULL: all, as 2^63-1).
SELECT CAST(o.job_type AS CHAR) AS job_type, CAST(o.op_key AS CHAR) AS op_key, o.state, o.token,
       o.owner, o.attempts, CAST(o.fingerprint AS CHAR) AS fingerprint, o.payload,
       o.external_ref, o.result, o.cancel_requested, o.error, o.due_at, o.claimed_at,
       o.lease_until, o.created_at, o.updated_at, o.completed_at FROM onceonly_ops AS o
JOIN (SELECT CAST(FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000) AS SIGNED) + ? AS now) AS c
WHERE (? IS NULL OR o.job_type = ?)
  AND (? IS NULL OR o.state = ?)
  AND (NOT ? OR (o.state = 'claimed' AND o.lease_until <= c.now))
ORDER BY o.updated_at, o.job_type, o.op_key
LIMIT ?
