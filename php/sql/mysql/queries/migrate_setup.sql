CREATE TABLE IF NOT EXISTS onceonly_migrations (
    version    BIGINT       NOT NULL PRIMARY KEY,
    name       VARCHAR(64)  NOT NULL,
    applied_at DATETIME(6)  NOT NULL DEFAULT NOW(6)
) ENGINE = InnoDB
