-- The audit trail: one appended row per exceptional transition, never
-- updated. `at` is the database's clock in ms, as every other time.
CREATE TABLE IF NOT EXISTS onceonly.audit (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_type    TEXT COLLATE "C" NOT NULL,
    op_key      TEXT COLLATE "C" NOT NULL,
    at          BIGINT NOT NULL,
    event       TEXT   NOT NULL,
    actor       TEXT   NOT NULL,
    token       BIGINT NOT NULL,
    from_state  TEXT,
    to_state    TEXT,
    detail      TEXT
);
CREATE INDEX IF NOT EXISTS audit_op ON onceonly.audit (job_type, op_key, id);
