-- Audit events within the last ?2 ms, by kind (index onceonly_audit_at).
SELECT event, count(*) AS n
FROM onceonly_audit INDEXED BY onceonly_audit_at
WHERE at >= (CAST(unixepoch('subsec') * 1000 AS INTEGER) + ?1) - ?2
GROUP BY event
