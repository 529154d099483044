INSERT INTO onceonly.ops (job_type, op_key, state, token, attempts, fingerprint, payload,
                          due_at, created_at, updated_at)
VALUES ($2, $3, 'queued', 0, 0, $4, $5, ((extract(epoch from statement_timestamp()) * 1000)::bigint + $1) + $6::bigint, ((extract(epoch from statement_timestamp()) * 1000)::bigint + $1), ((extract(epoch from statement_timestamp()) * 1000)::bigint + $1))
ON CONFLICT (job_type, op_key) DO NOTHING
