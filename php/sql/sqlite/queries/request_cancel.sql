UPDATE onceonly_ops SET cancel_requested = 1, updated_at = (CAST(unixepoch('subsec') * 1000 AS INTEGER) + ?1)
WHERE job_type = ?2 AND op_key = ?3 AND token = ?4 AND state = 'claimed'
