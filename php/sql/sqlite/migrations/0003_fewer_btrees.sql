-- Fewer b-trees written per commit, the main cost of a write here: the
-- primary key is the table itself (WITHOUT ROWID), and each index holds only
-- the rows its reader looks for (queued rows for the relay's claim and drain
-- check, live claims for its stale sweep, finished rows for purge), so none
-- of those reads scans the whole history. A claim and its completion now
-- touch 2 and 3 b-trees instead of 4 and 4, and the small ones stay cached.
CREATE TABLE onceonly_ops_v3 (
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
) WITHOUT ROWID;
INSERT INTO onceonly_ops_v3 (job_type, op_key, state, token, owner, attempts, fingerprint, payload,
                             external_ref, result, cancel_requested, error, due_at, claimed_at,
                             lease_until, created_at, updated_at, completed_at)
SELECT job_type, op_key, state, token, owner, attempts, fingerprint, payload,
       external_ref, result, cancel_requested, error, due_at, claimed_at,
       lease_until, created_at, updated_at, completed_at
FROM onceonly_ops;
DROP TABLE onceonly_ops;
ALTER TABLE onceonly_ops_v3 RENAME TO onceonly_ops;
CREATE INDEX onceonly_ops_queued ON onceonly_ops (job_type, due_at) WHERE state = 'queued';
CREATE INDEX onceonly_ops_claimed ON onceonly_ops (job_type, lease_until) WHERE state = 'claimed';
CREATE INDEX onceonly_ops_finished ON onceonly_ops (updated_at)
    WHERE state IN ('completed', 'failed', 'cancelled');
