-- The demo local effect's own table: one row per effect, no unique
-- constraint, so duplicates can be counted.
CREATE TABLE IF NOT EXISTS onceonly_replay_demo (
    job_type TEXT    NOT NULL,
    op_key   TEXT    NOT NULL,
    payload  TEXT,
    token    INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS onceonly_replay_demo_key ON onceonly_replay_demo (job_type, op_key);
