-- The operator's reads (crates/onceonly/src/operator.rs: the held list and
-- the overview) look only at the rows they show: held rows through a
-- partial index of their own (few, each waiting for a person; a write to
-- any other row never touches it) holding the columns the held list sorts
-- by, and the audit events of a recent window by their time. (Version 4:
-- version 3 is the partial indexes of the relay's reads, which the live
-- counts and the finished window read too.)
CREATE INDEX IF NOT EXISTS ops_held ON onceonly.ops (job_type, claimed_at, created_at)
    WHERE state = 'held';
CREATE INDEX IF NOT EXISTS audit_at ON onceonly.audit (at);
