-- A new record, claimed: the common case. No RETURNING, which costs SQLite a
-- temporary b-tree each run, so the clock (?8, SQLite's own clock read just
-- before this runs, + ?1) is bound and the claim is known without reading
-- it back. No row inserted: the record exists (claim.sql decides).
INSERT INTO onceonly_ops (job_type, op_key, state, token, owner, attempts, fingerprint, payload,
                          claimed_at, lease_until, created_at, updated_at)
VALUES (?2, ?3, 'claimed', 1, ?4, 1, ?5, ?6, ?8 + ?1, ?8 + ?1 + ?7, ?8 + ?1, ?8 + ?1)
ON CONFLICT (job_type, op_key) DO NOTHING
