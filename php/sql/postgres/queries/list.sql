SELECT * FROM onceonly.ops
WHERE ($2::text IS NULL OR job_type = $2::text)
  AND ($3::text IS NULL OR state = $3::text)
  AND (NOT $4::boolean OR (state = 'claimed' AND lease_until <= ((extract(epoch from statement_timestamp()) * 1000)::bigint + $1)))
ORDER BY updated_at, job_type, op_key
LIMIT $5::bigint
