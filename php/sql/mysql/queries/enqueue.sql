-- Insert a queued record. A duplicate key (1062) means it exists: the caller
-- reads it. (Not INSERT IGNORE: that would also turn a too-long value into a
-- warning and a cut value.) Binds: job_type, op_key, fingerprint, payload,
-- delay ms, offset.
INSERT INTO onceonly_ops (job_type, op_key, state, token, attempts, fingerprint, payload,
                          due_at, created_at, updated_at)
SELECT ?, ?, 'queued', 0, 0, ?, ?, c.now + ?, c.now, c.now
FROM (SELECT CAST(FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000) AS SIGNED) + ? AS now) AS c
