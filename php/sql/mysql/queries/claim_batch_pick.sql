-- The oldest due queued rows of a job type, locked. SKIP LOCKED (MariaDB
-- 10.6+, MySQL 8.0.1+): two relays never wait on each other's rows, and
-- never get the same one. Binds: job_type, offset, limit.
SELECT CAST(o.op_key AS CHAR) AS op_key FROM onceonly_ops AS o
WHERE o.job_type = ? AND o.state = 'queued'
  AND o.due_at <= (SELECT CAST(FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000) AS SIGNED) + ?)
ORDER BY o.due_at
LIMIT ?
FOR UPDATE SKIP LOCKED
