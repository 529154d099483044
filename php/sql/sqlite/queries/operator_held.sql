-- One page of held operations (?2: one job type, or all when NULL), oldest
-- claim first. The page's keys come from the partial index of held rows
-- alone (it holds the sort columns), and only the page's rows are read from
-- the table. ?3: page size (-1: all), ?4: rows skipped. (No INDEXED BY:
-- `onceonly held` reads a database as it finds it, and one not yet
-- migrated to version 5 has no such index; the planner picks it where it
-- exists, as the only index on held rows.)
SELECT o.* FROM (
    SELECT job_type, op_key, coalesce(claimed_at, created_at) AS started
    FROM onceonly_ops
    WHERE state = 'held' AND (?2 IS NULL OR job_type = ?2)
    ORDER BY started, job_type, op_key
    LIMIT ?3 OFFSET ?4
) AS page
JOIN onceonly_ops AS o ON o.job_type = page.job_type AND o.op_key = page.op_key
ORDER BY page.started, page.job_type, page.op_key
