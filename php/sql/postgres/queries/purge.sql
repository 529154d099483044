DELETE FROM onceonly.ops
WHERE state IN ('completed', 'failed', 'cancelled')
  AND ($2::text IS NULL OR job_type = $2::text)
  AND updated_at <= ((extract(epoch from statement_timestamp()) * 1000)::bigint + $1) - $3::bigint
