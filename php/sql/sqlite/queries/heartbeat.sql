UPDATE onceonly_ops SET lease_until = (CAST(unixepoch('subsec') * 1000 AS INTEGER) + ?1) + ?5, updated_at = (CAST(unixepoch('subsec') * 1000 AS INTEGER) + ?1)
WHERE job_type = ?2 AND op_key = ?3 AND token = ?4 AND state = 'claimed'
RETURNING lease_until, cancel_requested
