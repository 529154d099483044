-- The trail of a purged record goes with it (run after purge.sql, in its transaction);
-- the record of a purge itself (the empty key, no operation's) stays.
DELETE FROM onceonly.audit AS a
WHERE ($1::text IS NULL OR a.job_type = $1::text)
  AND a.op_key <> ''
  AND NOT EXISTS (SELECT 1 FROM onceonly.ops AS o
                  WHERE o.job_type = a.job_type AND o.op_key = a.op_key)
