-- get.sql with an exclusive lock on the row, for a claim in the user's
-- transaction when a plain read found the record: it locks the row before
-- any write, so two transactions claiming one existing key queue on it
-- instead of each holding the shared lock a duplicate-key insert leaves and
-- asking to upgrade it (deadlock 1213). Not for a missing key: there it
-- would take a gap lock, and two such inserts deadlock.
-- Binds: offset, job_type, op_key.
SELECT CAST(o.job_type AS CHAR) AS job_type, CAST(o.op_key AS CHAR) AS op_key, o.state, o.token,
       o.owner, o.attempts, CAST(o.fingerprint AS CHAR) AS fingerprint, o.payload,
       o.external_ref, o.result, o.cancel_requested, o.error, o.due_at, o.claimed_at,
       o.lease_until, o.created_at, o.updated_at, o.completed_at, c.now
FROM (SELECT CAST(FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000) AS SIGNED) + ? AS now) AS c
JOIN onceonly_ops AS o
WHERE o.job_type = ? AND o.op_key = ?
FOR UPDATE
