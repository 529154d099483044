SELECT COUNT(*) AS n FROM onceonly_replay_demo WHERE job_type = $1 AND op_key = $2
