-- One page of stuck claims (claimed, lease over; ?2: one job type, or all
-- when NULL), oldest claim first, through the partial index of live claims.
-- ?3: page size (-1: all), ?4: rows skipped.
SELECT * FROM onceonly_ops INDEXED BY onceonly_ops_claimed
WHERE state = 'claimed'
  AND lease_until <= (CAST(unixepoch('subsec') * 1000 AS INTEGER) + ?1)
  AND (?2 IS NULL OR job_type = ?2)
ORDER BY coalesce(claimed_at, created_at), job_type, op_key
LIMIT ?3 OFFSET ?4
