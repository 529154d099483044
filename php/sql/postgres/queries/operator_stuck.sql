-- One page of stuck claims (claimed, lease over; $2: one job type, or all
-- when NULL), oldest claim first, through the partial index of live claims.
-- $3: page size (NULL: all), $4: rows skipped.
SELECT * FROM onceonly.ops
WHERE state = 'claimed'
  AND lease_until <= ((extract(epoch from statement_timestamp()) * 1000)::bigint + $1)
  AND ($2::text IS NULL OR job_type = $2::text)
ORDER BY coalesce(claimed_at, created_at), job_type, op_key
LIMIT $3::bigint OFFSET $4::bigint
