-- The operator's overview counts the audit events of a recent window by
-- their time (crates/onceonly/src/operator.rs); the held and stuck lists
-- and the live counts read ops_updated (state, updated_at) by state.
CREATE INDEX IF NOT EXISTS audit_at ON onceonly.audit (at);
