-- The trail of a purged record goes with it (run after purge.sql, in its transaction);
-- the record of a purge itself (the empty key, no operation's) stays.
DELETE FROM onceonly_audit
WHERE (?1 IS NULL OR job_type = ?1)
  AND op_key <> ''
  AND NOT EXISTS (SELECT 1 FROM onceonly_ops AS o
                  WHERE o.job_type = onceonly_audit.job_type AND o.op_key = onceonly_audit.op_key)
