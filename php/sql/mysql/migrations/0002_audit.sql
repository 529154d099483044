-- The audit trail: one appended row per exceptional transition, never
-- updated. `at` is the database's clock in ms, as every other time. A
-- release (`retry`, `released`) carries its attempt and how long until the
-- operation is due again, in ms after `at`; both are NULL on other events.
CREATE TABLE IF NOT EXISTS onceonly_audit (
    id             BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    job_type       VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
    op_key         VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
    at             BIGINT      NOT NULL,
    event          VARCHAR(32) NOT NULL,
    actor          LONGTEXT    NOT NULL,
    token          BIGINT      NOT NULL,
    from_state     VARCHAR(16),
    to_state       VARCHAR(16),
    detail         LONGTEXT,
    attempt        BIGINT,
    retry_after_ms BIGINT,
    INDEX audit_op (job_type, op_key, id),
    INDEX audit_at (at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4
