-- One page of held operations, oldest claim first.
-- Binds: job_type (NULL: all), same, page size, rows skipped.
SELECT CAST(o.job_type AS CHAR) AS job_type, CAST(o.op_key AS CHAR) AS op_key, o.state, o.token,
       o.owner, o.attempts, CAST(o.fingerprint AS CHAR) AS fingerprint, o.payload,
       o.external_ref, o.result, o.cancel_requested, o.error, o.due_at, o.claimed_at,
       o.lease_until, o.created_at, o.updated_at, o.completed_at
FROM onceonly_ops AS o
WHERE o.state = 'held' AND (? IS NULL OR o.job_type = ?)
ORDER BY COALESCE(o.claimed_at, o.created_at), o.job_type, o.op_key
LIMIT ? OFFSET ?
