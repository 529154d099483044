-- Complete many claims at once, each only while still claimed with its own
-- token and no cancel requested. Returns the keys it completed.
UPDATE onceonly.ops AS ops SET
    state = 'completed',
    external_ref = COALESCE(done.external_ref, ops.external_ref),
    result = done.result,
    error = NULL,
    completed_at = ((extract(epoch from statement_timestamp()) * 1000)::bigint + $1),
    lease_until = NULL,
    updated_at = ((extract(epoch from statement_timestamp()) * 1000)::bigint + $1)
FROM unnest($3::text[], $4::bigint[], $5::text[], $6::text[]) AS done(op_key, token, external_ref, result)
WHERE ops.job_type = $2
  AND ops.op_key = done.op_key
  AND ops.token = done.token
  AND ops.state = 'claimed'
  AND NOT ops.cancel_requested
RETURNING ops.op_key
