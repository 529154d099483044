-- One operation's audit trail, oldest first.
SELECT id, job_type, op_key, at, event, actor, token, from_state, to_state, detail, attempt,
       retry_after_ms
FROM onceonly_audit WHERE job_type = ?1 AND op_key = ?2 ORDER BY id
