-- Insert the record claimed, or claim it if it is queued, due and carries the
-- same payload. No row returned: someone else has it (read it and decide).
INSERT INTO onceonly_ops (job_type, op_key, state, token, owner, attempts, fingerprint, payload,
                          claimed_at, lease_until, created_at, updated_at)
VALUES (?2, ?3, 'claimed', 1, ?4, 1, ?5, ?6, (CAST(unixepoch('subsec') * 1000 AS INTEGER) + ?1), (CAST(unixepoch('subsec') * 1000 AS INTEGER) + ?1) + ?7, (CAST(unixepoch('subsec') * 1000 AS INTEGER) + ?1), (CAST(unixepoch('subsec') * 1000 AS INTEGER) + ?1))
ON CONFLICT (job_type, op_key) DO UPDATE SET
    state = 'claimed', token = token + 1, owner = excluded.owner, attempts = attempts + 1,
    claimed_at = excluded.claimed_at, lease_until = excluded.lease_until,
    updated_at = excluded.updated_at
WHERE state = 'queued'
  AND fingerprint = excluded.fingerprint
  AND (due_at IS NULL OR due_at <= excluded.claimed_at)
RETURNING token, attempts, claimed_at, lease_until
