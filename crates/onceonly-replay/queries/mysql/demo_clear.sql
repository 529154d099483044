DELETE FROM onceonly_replay_demo WHERE job_type = ?
