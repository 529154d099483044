INSERT INTO onceonly_replay_demo (job_type, op_key, payload, token) VALUES (?, ?, ?, ?)
