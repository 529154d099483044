-- Times are BIGINT milliseconds since the Unix epoch, as in SQLite, so every
-- store compares leases the same way. The payload is TEXT, not JSONB: the
-- canonical JSON is kept byte for byte, as its fingerprint was taken.
-- Identity columns compare bytewise (COLLATE "C"), as SQLite does.
CREATE TABLE IF NOT EXISTS onceonly.ops (
    job_type         TEXT COLLATE "C" NOT NULL,
    op_key           TEXT COLLATE "C" NOT NULL,
    state            TEXT    NOT NULL
        CHECK (state IN ('queued', 'claimed', 'completed', 'failed', 'held', 'cancelled')),
    token            BIGINT  NOT NULL DEFAULT 0,
    owner            TEXT,
    attempts         BIGINT  NOT NULL DEFAULT 0,
    fingerprint      TEXT    NOT NULL,
    payload          TEXT,
    external_ref     TEXT,
    result           TEXT,
    cancel_requested BOOLEAN NOT NULL DEFAULT false,
    error            TEXT,
    due_at           BIGINT,
    claimed_at       BIGINT,
    lease_until      BIGINT,
    created_at       BIGINT  NOT NULL,
    updated_at       BIGINT  NOT NULL,
    completed_at     BIGINT,
    PRIMARY KEY (job_type, op_key)
);
CREATE INDEX IF NOT EXISTS ops_due ON onceonly.ops (job_type, state, due_at);
CREATE INDEX IF NOT EXISTS ops_updated ON onceonly.ops (state, updated_at);
