-- The operator's reads (crates/onceonly/src/operator.rs: the held list and
-- the overview) read only the rows they show, from indexes alone:
-- - held rows through a partial index of their own (few, each waiting for a
--   person; a write to any other row never touches it), holding the columns
--   the held list sorts by and the overview's oldest held age;
-- - the audit events of a recent window by their time;
-- - finished rows by update time, now with their state, so the overview
--   counts a window's completed, failed and cancelled records without
--   reading the table (purge reads the same index, by update time).
CREATE INDEX onceonly_ops_held ON onceonly_ops (job_type, claimed_at, created_at)
    WHERE state = 'held';
CREATE INDEX onceonly_audit_at ON onceonly_audit (at);
DROP INDEX onceonly_ops_finished;
-- purge.sql repeats this condition word for word, so the planner matches it.
CREATE INDEX onceonly_ops_finished ON onceonly_ops (updated_at, state)
    WHERE state = 'completed' OR state = 'failed' OR state = 'cancelled';
