CREATE TABLE IF NOT EXISTS onceonly_ops (
    job_type         TEXT    NOT NULL,
    op_key           TEXT    NOT NULL,
    state            TEXT    NOT NULL
        CHECK (state IN ('queued', 'claimed', 'completed', 'failed', 'held', 'cancelled')),
    token            INTEGER NOT NULL DEFAULT 0,
    owner            TEXT,
    attempts         INTEGER NOT NULL DEFAULT 0,
    fingerprint      TEXT    NOT NULL,
    payload          TEXT,
    external_ref     TEXT,
    result           TEXT,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    error            TEXT,
    due_at           INTEGER,
    claimed_at       INTEGER,
    lease_until      INTEGER,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    completed_at     INTEGER,
    PRIMARY KEY (job_type, op_key)
);
CREATE INDEX IF NOT EXISTS onceonly_ops_due ON onceonly_ops (job_type, state, due_at);
CREATE INDEX IF NOT EXISTS onceonly_ops_updated ON onceonly_ops (state, updated_at);
