-- Move a claim whose lease is over to a new token, in the state the policy chose.
-- A held or failed row has no lease: the lease it reports ended now.
UPDATE onceonly.ops SET
    token = token + 1,
    state = $5::text,
    owner = $6,
    attempts = attempts + (CASE WHEN $5::text = 'claimed' THEN 1 ELSE 0 END),
    claimed_at = CASE WHEN $5::text = 'claimed' THEN ((extract(epoch from statement_timestamp()) * 1000)::bigint + $1) ELSE claimed_at END,
    lease_until = CASE WHEN $5::text = 'claimed' THEN ((extract(epoch from statement_timestamp()) * 1000)::bigint + $1) + $7::bigint ELSE NULL END,
    error = $8,
    updated_at = ((extract(epoch from statement_timestamp()) * 1000)::bigint + $1)
WHERE job_type = $2 AND op_key = $3 AND state = 'claimed' AND token = $4
  AND lease_until <= ((extract(epoch from statement_timestamp()) * 1000)::bigint + $1)
RETURNING token, attempts, claimed_at, COALESCE(lease_until, updated_at) AS lease_until
