-- One operation's audit trail, oldest first. Binds: job_type, op_key.
SELECT id, CAST(job_type AS CHAR) AS job_type, CAST(op_key AS CHAR) AS op_key, at, event, actor, token, from_state, to_state, detail, attempt,
       retry_after_ms
FROM onceonly_audit WHERE job_type = ? AND op_key = ? ORDER BY id
