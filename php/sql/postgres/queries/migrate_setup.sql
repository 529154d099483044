CREATE SCHEMA IF NOT EXISTS onceonly;
CREATE TABLE IF NOT EXISTS onceonly.migrations (
    version    BIGINT      PRIMARY KEY,
    name       TEXT        NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
