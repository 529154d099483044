SELECT *, (CAST(unixepoch('subsec') * 1000 AS INTEGER) + ?1) AS now FROM onceonly_ops WHERE job_type = ?2 AND op_key = ?3
