INSERT INTO onceonly_ops (job_type, op_key, state, token, attempts, fingerprint, payload,
                          due_at, created_at, updated_at)
VALUES (?2, ?3, 'queued', 0, 0, ?4, ?5, (CAST(unixepoch('subsec') * 1000 AS INTEGER) + ?1) + ?6, (CAST(unixepoch('subsec') * 1000 AS INTEGER) + ?1), (CAST(unixepoch('subsec') * 1000 AS INTEGER) + ?1))
ON CONFLICT (job_type, op_key) DO NOTHING
