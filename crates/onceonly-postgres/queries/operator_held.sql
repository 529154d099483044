-- One page of held operations ($2: one job type, or all when NULL), oldest
-- claim first, through the partial index ops_held: the sort costs the held
-- rows, never the history. $3: page size (NULL: all), $4: rows skipped.
SELECT * FROM onceonly.ops
WHERE state = 'held' AND ($2::text IS NULL OR job_type = $2::text)
ORDER BY coalesce(claimed_at, created_at), job_type, op_key
LIMIT $3::bigint OFFSET $4::bigint
