-- One fenced transition: only from state $5 with token $4. A move to
-- queued is due again after $11 ms (a retry's backoff).
UPDATE onceonly.ops SET
    state = $6::text,
    external_ref = COALESCE($7::text, external_ref),
    result = COALESCE($8::text, result),
    error = CASE WHEN $6::text = 'completed' THEN $9::text ELSE COALESCE($9::text, error) END,
    completed_at = CASE WHEN $6::text = 'completed' THEN ((extract(epoch from statement_timestamp()) * 1000)::bigint + $1) ELSE completed_at END,
    lease_until = NULL,
    cancel_requested = CASE WHEN $6::text = 'queued' THEN false ELSE cancel_requested END,
    due_at = CASE WHEN $6::text = 'queued' THEN ((extract(epoch from statement_timestamp()) * 1000)::bigint + $1) + $11::bigint ELSE due_at END,
    updated_at = ((extract(epoch from statement_timestamp()) * 1000)::bigint + $1)
WHERE job_type = $2 AND op_key = $3 AND token = $4 AND state = $5::text
  AND (NOT $10::boolean OR NOT cancel_requested)
