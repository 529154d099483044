-- Move a claim whose lease is over to a new token, in the state the policy chose.
UPDATE onceonly_ops SET
    token = token + 1,
    state = ?5,
    owner = ?6,
    attempts = attempts + (CASE WHEN ?5 = 'claimed' THEN 1 ELSE 0 END),
    claimed_at = CASE WHEN ?5 = 'claimed' THEN (CAST(unixepoch('subsec') * 1000 AS INTEGER) + ?1) ELSE claimed_at END,
    lease_until = CASE WHEN ?5 = 'claimed' THEN (CAST(unixepoch('subsec') * 1000 AS INTEGER) + ?1) + ?7 ELSE NULL END,
    error = ?8,
    updated_at = (CAST(unixepoch('subsec') * 1000 AS INTEGER) + ?1)
WHERE job_type = ?2 AND op_key = ?3 AND state = 'claimed' AND token = ?4 AND lease_until <= (CAST(unixepoch('subsec') * 1000 AS INTEGER) + ?1)
-- Held and failed rows have no lease: the old one ended at the take-over.
RETURNING token, attempts, claimed_at, COALESCE(lease_until, updated_at) AS lease_until
