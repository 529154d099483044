-- claim.sql for many operations in one statement (the store's batcher): one
-- row per element of the arrays ($2 job types, $3 keys, $4 owners,
-- $5 fingerprints, $6 payloads, $7 leases in ms). The caller sends each key
-- once (ON CONFLICT may not meet a row twice) and sorts them by job type and
-- key: rows are inserted, and locked, in array order, so two processes'
-- batches take their locks in the same order and cannot deadlock.
-- Returns the rows claimed; a key missing from the answer is someone else's.
INSERT INTO onceonly.ops AS ops (job_type, op_key, state, token, owner, attempts, fingerprint,
                                 payload, claimed_at, lease_until, created_at, updated_at)
SELECT c.job_type, c.op_key, 'claimed', 1, c.owner, 1, c.fingerprint, c.payload, ((extract(epoch from statement_timestamp()) * 1000)::bigint + $1), ((extract(epoch from statement_timestamp()) * 1000)::bigint + $1) + c.lease, ((extract(epoch from statement_timestamp()) * 1000)::bigint + $1), ((extract(epoch from statement_timestamp()) * 1000)::bigint + $1)
FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[])
     WITH ORDINALITY AS c(job_type, op_key, owner, fingerprint, payload, lease, n)
ORDER BY c.n
ON CONFLICT (job_type, op_key) DO UPDATE SET
    state = 'claimed', token = ops.token + 1, owner = excluded.owner, attempts = ops.attempts + 1,
    claimed_at = excluded.claimed_at, lease_until = excluded.lease_until,
    updated_at = excluded.updated_at
WHERE ops.state = 'queued'
  AND ops.fingerprint = excluded.fingerprint
  AND (ops.due_at IS NULL OR ops.due_at <= excluded.claimed_at)
RETURNING ops.job_type, ops.op_key, token, attempts, claimed_at, lease_until
