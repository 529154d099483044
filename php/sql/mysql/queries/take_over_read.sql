-- The claim take_over.sql just wrote, in its transaction. A held or failed
-- row has no lease: the lease it reports ended at the take-over.
-- Binds: job_type, op_key, token.
SELECT token, attempts, claimed_at, COALESCE(lease_until, updated_at) AS lease_until
FROM onceonly_ops
WHERE job_type = ? AND op_key = ? AND token = ?
