-- Audit events within the last window (ms), by kind (index audit_at).
-- Binds: offset, window ms.
SELECT a.event, COUNT(*) AS n
FROM onceonly_audit AS a
JOIN (SELECT CAST(FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000) AS SIGNED) + ? AS now) AS c
WHERE a.at >= c.now - ?
GROUP BY a.event
