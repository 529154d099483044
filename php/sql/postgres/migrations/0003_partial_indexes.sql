-- A claim and its completion write every index of the table (a change of
-- state is never a HOT update), so the table keeps only the indexes a query
-- reads, each holding only the rows it is read for:
--   ops_queued   queued rows, by due time: the relay's batch claim, the drain check;
--   ops_claimed  live claims, by lease end: the stale sweep;
--   ops_finished finished rows, by last update: purge (purge.sql repeats the
--                condition word for word, so the planner matches it).
-- A new operation's claim and completion then write the primary key twice,
-- ops_claimed once and ops_finished once, instead of all three indexes twice.
-- The records stay as they are; only indexes change.
DROP INDEX IF EXISTS onceonly.ops_due;
DROP INDEX IF EXISTS onceonly.ops_updated;
CREATE INDEX IF NOT EXISTS ops_queued ON onceonly.ops (job_type, due_at) WHERE state = 'queued';
CREATE INDEX IF NOT EXISTS ops_claimed ON onceonly.ops (job_type, lease_until) WHERE state = 'claimed';
CREATE INDEX IF NOT EXISTS ops_finished ON onceonly.ops (updated_at)
    WHERE state IN ('completed', 'failed', 'cancelled');
