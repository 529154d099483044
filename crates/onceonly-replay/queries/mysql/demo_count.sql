SELECT COUNT(*) AS n FROM onceonly_replay_demo WHERE job_type = ? AND op_key = ?
