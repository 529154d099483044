-- One completion of a batch: only while still claimed with its token and no
-- cancel requested. Bumps the version: 1 completed, 0 not ours.
-- Binds: offset, external_ref, result, job_type, op_key, token.
UPDATE onceonly_ops AS o
JOIN (SELECT CAST(FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000) AS SIGNED) + ? AS now,
             ? AS external_ref, ? AS result) AS d
SET o.state = 'completed',
    o.version = o.version + 1,
    o.external_ref = COALESCE(d.external_ref, o.external_ref),
    o.result = d.result,
    o.error = NULL,
    o.completed_at = d.now,
    o.lease_until = NULL,
    o.updated_at = d.now
WHERE o.job_type = ? AND o.op_key = ? AND o.token = ?
  AND o.state = 'claimed'
  AND NOT o.cancel_requested
