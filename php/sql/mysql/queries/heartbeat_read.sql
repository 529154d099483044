-- The lease heartbeat.sql just wrote, in its transaction. Binds: job_type, op_key, token.
SELECT lease_until, cancel_requested FROM onceonly_ops
WHERE job_type = ? AND op_key = ? AND token = ?
