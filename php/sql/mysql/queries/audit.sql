-- Appends one audit event, timed by the database's clock plus the offset.
-- attempt and retry after ms are NULL except on a release.
-- Binds: job_type, op_key, event, actor, token, from, to, detail, attempt,
--        retry ms, offset.
INSERT INTO onceonly_audit (job_type, op_key, at, event, actor, token, from_state, to_state, detail,
                            attempt, retry_after_ms)
SELECT ?, ?, c.now, ?, ?, ?, ?, ?, ?, ?, ?
FROM (SELECT CAST(FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000) AS SIGNED) + ? AS now) AS c
