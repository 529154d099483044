-- Audit events within the last $2 ms, by kind (index audit_at).
SELECT event, count(*) AS n
FROM onceonly.audit
WHERE at >= ((extract(epoch from statement_timestamp()) * 1000)::bigint + $1) - $2::bigint
GROUP BY event
