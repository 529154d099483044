-- The trail of a purged record goes with it (run after purge.sql, in its
-- transaction). Binds: job_type (NULL: all), same.
DELETE a FROM onceonly_audit AS a
LEFT JOIN onceonly_ops AS o ON o.job_type = a.job_type AND o.op_key = a.op_key
WHERE (? IS NULL OR a.job_type = ?)
  AND o.op_key IS NULL
