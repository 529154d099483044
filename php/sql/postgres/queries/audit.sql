-- Appends one audit event, timed by the database's clock plus $1 ms. $10
-- and $11 (attempt, retry after ms) are NULL except on a release.
INSERT INTO onceonly.audit (job_type, op_key, at, event, actor, token, from_state, to_state, detail,
                            attempt, retry_after_ms)
VALUES ($2, $3, ((extract(epoch from statement_timestamp()) * 1000)::bigint + $1), $4, $5, $6, $7, $8, $9,
        $10::bigint, $11::bigint)
