-- The operator's reads (crates/onceonly/src/operator.rs: the held list and
-- the overview) look only at the rows they show: held rows through a
-- partial index of their own (few, each waiting for a person; a write to
-- any other row never touches it), and the audit events of a recent window
-- by their time.
CREATE INDEX onceonly_ops_held ON onceonly_ops (job_type, claimed_at) WHERE state = 'held';
CREATE INDEX onceonly_audit_at ON onceonly_audit (at);
