-- The first half of a claim: insert the record claimed, token 1, at `now`
-- (the database's clock, read by now.sql just before). A duplicate key
-- (1062) means the record exists: claim_update.sql decides.
-- Binds: job_type, op_key, owner, fingerprint, payload, now, lease end, now, now.
INSERT INTO onceonly_ops (job_type, op_key, state, token, version, owner, attempts, fingerprint,
                          payload, claimed_at, lease_until, created_at, updated_at)
VALUES (?, ?, 'claimed', 1, 1, ?, 1, ?, ?, ?, ?, ?, ?)
