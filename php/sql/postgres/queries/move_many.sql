-- move.sql for many operations in one statement (the store's batcher): one
-- fenced transition per element of the arrays ($2 job types, $3 keys,
-- $4 tokens, $5 from states, $6 to states, $7 external refs, $8 results,
-- $9 errors, $10 unless cancel requested, $11 retry after ms). Each row
-- changes only if it is in its from state with its token. The caller sends
-- each key once and sorts them by job type and key; the join walks the
-- arrays in order (a nested loop over the primary key), so rows are locked
-- in key order. Returns the rows moved.
UPDATE onceonly.ops AS ops SET
    state = m.to_state,
    external_ref = COALESCE(m.external_ref, ops.external_ref),
    result = COALESCE(m.result, ops.result),
    error = CASE WHEN m.to_state = 'completed' THEN m.error ELSE COALESCE(m.error, ops.error) END,
    completed_at = CASE WHEN m.to_state = 'completed' THEN ((extract(epoch from statement_timestamp()) * 1000)::bigint + $1) ELSE ops.completed_at END,
    lease_until = NULL,
    cancel_requested = CASE WHEN m.to_state = 'queued' THEN false ELSE ops.cancel_requested END,
    due_at = CASE WHEN m.to_state = 'queued' THEN ((extract(epoch from statement_timestamp()) * 1000)::bigint + $1) + m.retry_after ELSE ops.due_at END,
    updated_at = ((extract(epoch from statement_timestamp()) * 1000)::bigint + $1)
FROM unnest($2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::text[], $8::text[],
            $9::text[], $10::boolean[], $11::bigint[])
     AS m(job_type, op_key, token, from_state, to_state, external_ref, result, error,
          unless_cancel_requested, retry_after)
WHERE ops.job_type = m.job_type AND ops.op_key = m.op_key
  AND ops.token = m.token AND ops.state = m.from_state
  AND (NOT m.unless_cancel_requested OR NOT ops.cancel_requested)
RETURNING ops.job_type, ops.op_key
