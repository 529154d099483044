-- The records, as PostgreSQL's onceonly.ops: times are BIGINT milliseconds
-- since the Unix epoch (the database's NOW(6), which has the fraction NOW()
-- lacks), so every store compares leases the same way; the payload is text
-- kept byte for byte.
-- The identity columns compare bytewise with trailing spaces significant
-- (utf8mb4_nopad_bin: utf8mb4_bin pads, so `k` and `k ` would be one key;
-- the default collations also fold case); so does the fingerprint. sqlx
-- reads a binary-collated column as bytes, so the reads CAST them AS CHAR. `version` goes up on every update,
-- so a statement that matches a row always changes it, and its affected-row
-- count is the same with CLIENT_FOUND_ROWS and without (see src/lib.rs).
-- MySQL has no partial indexes and no CREATE INDEX IF NOT EXISTS: the
-- indexes are part of the table, so the statement is idempotent as a whole.
CREATE TABLE IF NOT EXISTS onceonly_ops (
    job_type         VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
    op_key           VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
    state            VARCHAR(16) NOT NULL
        CHECK (state IN ('queued', 'claimed', 'completed', 'failed', 'held', 'cancelled')),
    token            BIGINT     NOT NULL DEFAULT 0,
    version          BIGINT     NOT NULL DEFAULT 0,
    owner            LONGTEXT,
    attempts         BIGINT     NOT NULL DEFAULT 0,
    fingerprint      VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    payload          LONGTEXT,
    external_ref     LONGTEXT,
    result           LONGTEXT,
    cancel_requested BOOLEAN    NOT NULL DEFAULT false,
    error            LONGTEXT,
    due_at           BIGINT,
    claimed_at       BIGINT,
    lease_until      BIGINT,
    created_at       BIGINT     NOT NULL,
    updated_at       BIGINT     NOT NULL,
    completed_at     BIGINT,
    PRIMARY KEY (job_type, op_key),
    INDEX ops_due (job_type, state, due_at),
    INDEX ops_lease (job_type, state, lease_until),
    INDEX ops_updated (state, updated_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4
