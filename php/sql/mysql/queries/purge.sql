-- Delete finished records not updated for the retention (ms).
-- Binds: offset, job_type (NULL: all), same, retention ms.
DELETE o FROM onceonly_ops AS o
JOIN (SELECT CAST(FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000) AS SIGNED) + ? AS now) AS c
WHERE o.state IN ('completed', 'failed', 'cancelled')
  AND (? IS NULL OR o.job_type = ?)
  AND o.updated_at <= c.now - ?
