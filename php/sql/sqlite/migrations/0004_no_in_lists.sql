-- The state checks written as `=` chains instead of `IN (...)` lists. SQLite
-- evaluates a constant IN list by building a temporary b-tree each time a
-- statement runs, and these lists are evaluated on every write: the CHECK on
-- every row written, the finished index's condition on the row before and
-- after. A claim and its completion built nine such b-trees (about a third
-- of their time); they build none now. Same table, same rows, same indexes.
CREATE TABLE onceonly_ops_v4 (
    job_type         TEXT    NOT NULL,
    op_key           TEXT    NOT NULL,
    state            TEXT    NOT NULL
        CHECK (state = 'queued' OR state = 'claimed' OR state = 'completed'
               OR state = 'failed' OR state = 'held' OR state = 'cancelled'),
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
INSERT INTO onceonly_ops_v4 (job_type, op_key, state, token, owner, attempts, fingerprint, payload,
                             external_ref, result, cancel_requested, error, due_at, claimed_at,
                             lease_until, created_at, updated_at, completed_at)
SELECT job_type, op_key, state, token, owner, attempts, fingerprint, payload,
       external_ref, result, cancel_requested, error, due_at, claimed_at,
       lease_until, created_at, updated_at, completed_at
FROM onceonly_ops;
DROP TABLE onceonly_ops;
ALTER TABLE onceonly_ops_v4 RENAME TO onceonly_ops;
CREATE INDEX onceonly_ops_queued ON onceonly_ops (job_type, due_at) WHERE state = 'queued';
CREATE INDEX onceonly_ops_claimed ON onceonly_ops (job_type, lease_until) WHERE state = 'claimed';
-- purge.sql repeats this condition word for word, so the planner matches it.
CREATE INDEX onceonly_ops_finished ON onceonly_ops (updated_at)
    WHERE state = 'completed' OR state = 'failed' OR state = 'cancelled';
