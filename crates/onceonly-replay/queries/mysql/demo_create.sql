-- The demo local effect's own table: one row per effect, no unique
-- constraint, so duplicates can be counted. Keys compare bytewise, as
-- onceonly's own (utf8mb4_nopad_bin).
CREATE TABLE IF NOT EXISTS onceonly_replay_demo (
    job_type VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
    op_key   VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
    payload  LONGTEXT,
    token    BIGINT NOT NULL,
    INDEX onceonly_replay_demo_key (job_type, op_key)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
