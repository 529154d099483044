UPDATE onceonly.ops SET lease_until = ((extract(epoch from statement_timestamp()) * 1000)::bigint + $1) + $5::bigint, updated_at = ((extract(epoch from statement_timestamp()) * 1000)::bigint + $1)
WHERE job_type = $2 AND op_key = $3 AND token = $4 AND state = 'claimed'
RETURNING lease_until, cancel_requested
