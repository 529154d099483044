-- One page of held operations ($2: one job type, or all when NULL), oldest
-- claim first. The page's keys come from the partial index ops_held (it
-- holds the sort columns), and only the page's rows are read from the
-- table. $3: page size (NULL: all), $4: rows skipped.
SELECT o.* FROM (
    SELECT job_type, op_key, coalesce(claimed_at, created_at) AS started
    FROM onceonly.ops
    WHERE state = 'held' AND ($2::text IS NULL OR job_type = $2::text)
    ORDER BY started, job_type, op_key
    LIMIT $3::bigint OFFSET $4::bigint
) AS page
JOIN onceonly.ops AS o ON o.job_type = page.job_type AND o.op_key = page.op_key
ORDER BY page.started, page.job_type, page.op_key
