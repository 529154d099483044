-- The audit trail: one appended row per exceptional transition, never
-- updated. `at` is the database's clock in ms, as every other time.
CREATE TABLE IF NOT EXISTS onceonly_audit (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    job_type    TEXT    NOT NULL,
    op_key      TEXT    NOT NULL,
    at          INTEGER NOT NULL,
    event       TEXT    NOT NULL,
    actor       TEXT    NOT NULL,
    token       INTEGER NOT NULL,
    from_state  TEXT,
    to_state    TEXT,
    detail      TEXT
);
CREATE INDEX IF NOT EXISTS onceonly_audit_op ON onceonly_audit (job_type, op_key, id);
