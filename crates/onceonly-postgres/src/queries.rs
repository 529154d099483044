//! One thin function per query file; each returns what the database did,
//! affected-row counts included, and decides nothing.
//!
//! The files name the tables `onceonly.ops`, `onceonly.audit` and
//! `onceonly.migrations`;
//! [`Queries::new`] puts the store's schema in their place once, at connect,
//! so no statement depends on the connection's `search_path` (the user's own
//! transaction shares the connection for local effects).

use onceonly::store::{
    Claim, Heartbeat, OpAudit, OpClaim, OpClaimBatch, OpCompleteBatch, OpEnqueue, OpHeartbeat,
    OpList, OpMove, OpPurge, OpRequestCancel, OpTakeOver,
};
use onceonly::{AuditEvent, DbTime, Record, Snapshot};
use onceonly_sqlx::{
    audit_from_row, claim_from_row, millis, record_from_row, snapshot_from_row, Migration,
};
use sqlx::{Executor, PgConnection, Row};

const CLAIM: &str = include_str!("../queries/claim.sql");
const TAKE_OVER: &str = include_str!("../queries/take_over.sql");
const MOVE: &str = include_str!("../queries/move.sql");
const HEARTBEAT: &str = include_str!("../queries/heartbeat.sql");
const REQUEST_CANCEL: &str = include_str!("../queries/request_cancel.sql");
const GET: &str = include_str!("../queries/get.sql");
const LIST: &str = include_str!("../queries/list.sql");
const PURGE: &str = include_str!("../queries/purge.sql");
const PURGE_AUDIT: &str = include_str!("../queries/purge_audit.sql");
const ENQUEUE: &str = include_str!("../queries/enqueue.sql");
const CLAIM_BATCH: &str = include_str!("../queries/claim_batch.sql");
const COMPLETE_BATCH: &str = include_str!("../queries/complete_batch.sql");
const NO_NESTED_LOOP: &str = include_str!("../queries/no_nested_loop.sql");
const NOW: &str = include_str!("../queries/now.sql");
const AUDIT: &str = include_str!("../queries/audit.sql");
const HISTORY: &str = include_str!("../queries/history.sql");
const MIGRATE_LOCK: &str = include_str!("../queries/migrate_lock.sql");
const MIGRATE_SETUP: &str = include_str!("../queries/migrate_setup.sql");
const MIGRATE_APPLIED: &str = include_str!("../queries/migrate_applied.sql");
const MIGRATE_RECORD: &str = include_str!("../queries/migrate_record.sql");
const CLAIM_MANY: &str = include_str!("../queries/claim_many.sql");
const GET_MANY: &str = include_str!("../queries/get_many.sql");
const MOVE_MANY: &str = include_str!("../queries/move_many.sql");

/// The schema the query files are written with.
const FILE_SCHEMA: &str = "onceonly";

type Res<T> = Result<T, sqlx::Error>;

/// [`OpClaim`]s as the arrays `claim_many.sql` binds, one element per claim.
#[derive(Debug, Default)]
pub(crate) struct ClaimColumns<'a> {
    pub(crate) job_types: Vec<&'a str>,
    pub(crate) op_keys: Vec<&'a str>,
    pub(crate) owners: Vec<&'a str>,
    pub(crate) fingerprints: Vec<&'a str>,
    pub(crate) payloads: Vec<Option<&'a str>>,
    pub(crate) leases: Vec<i64>,
}

impl<'a> ClaimColumns<'a> {
    pub(crate) fn push(&mut self, p: &OpClaim<'a>) {
        self.job_types.push(p.job_type);
        self.op_keys.push(p.op_key);
        self.owners.push(p.owner);
        self.fingerprints.push(p.fingerprint);
        self.payloads.push(p.payload);
        self.leases.push(millis(p.lease));
    }
}

/// [`OpMove`]s as the arrays `move_many.sql` binds, one element per move.
#[derive(Debug, Default)]
pub(crate) struct MoveColumns<'a> {
    pub(crate) job_types: Vec<&'a str>,
    pub(crate) op_keys: Vec<&'a str>,
    pub(crate) tokens: Vec<i64>,
    pub(crate) from: Vec<&'static str>,
    pub(crate) to: Vec<&'static str>,
    pub(crate) external_refs: Vec<Option<&'a str>>,
    pub(crate) results: Vec<Option<&'a str>>,
    pub(crate) errors: Vec<Option<&'a str>>,
    pub(crate) unless_cancel_requested: Vec<bool>,
    pub(crate) retry_after: Vec<i64>,
}

impl<'a> MoveColumns<'a> {
    pub(crate) fn push(&mut self, p: &OpMove<'a>) {
        self.job_types.push(p.job_type);
        self.op_keys.push(p.op_key);
        self.tokens.push(p.token);
        self.from.push(p.from.as_str());
        self.to.push(p.to.as_str());
        self.external_refs.push(p.external_ref);
        self.results.push(p.result);
        self.errors.push(p.error);
        self.unless_cancel_requested.push(p.unless_cancel_requested);
        self.retry_after.push(p.retry_after.map_or(0, millis));
    }
}

/// `sql` with every `onceonly` identifier (the schema the files are written
/// with) replaced by `schema`, quoted. `schema` must be a valid identifier.
pub(crate) fn in_schema(sql: &str, schema: &str) -> String {
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '"' || c == '$';
    let mut out = String::with_capacity(sql.len() + 16);
    let mut rest = sql;
    while let Some(at) = rest.find(FILE_SCHEMA) {
        let before = rest[..at].chars().next_back();
        let after = rest[at + FILE_SCHEMA.len()..].chars().next();
        out.push_str(&rest[..at]);
        if before.is_some_and(is_ident) || after.is_some_and(is_ident) {
            out.push_str(FILE_SCHEMA);
        } else {
            out.push('"');
            out.push_str(schema);
            out.push('"');
        }
        rest = &rest[at + FILE_SCHEMA.len()..];
    }
    out.push_str(rest);
    out
}

/// Every query text with the store's schema in it.
#[derive(Debug)]
pub(crate) struct Queries {
    schema: String,
    claim: String,
    take_over: String,
    move_op: String,
    heartbeat: String,
    request_cancel: String,
    get: String,
    list: String,
    purge: String,
    purge_audit: String,
    enqueue: String,
    claim_batch: String,
    complete_batch: String,
    now: String,
    audit: String,
    history: String,
    migrate_lock: String,
    migrate_setup: String,
    migrate_applied: String,
    migrate_record: String,
    claim_many: String,
    get_many: String,
    move_many: String,
}

impl Queries {
    /// The queries on tables in `schema` (already validated).
    pub(crate) fn new(schema: &str) -> Self {
        let q = |sql| in_schema(sql, schema);
        Self {
            schema: schema.to_owned(),
            claim: q(CLAIM),
            take_over: q(TAKE_OVER),
            move_op: q(MOVE),
            heartbeat: q(HEARTBEAT),
            request_cancel: q(REQUEST_CANCEL),
            get: q(GET),
            list: q(LIST),
            purge: q(PURGE),
            purge_audit: q(PURGE_AUDIT),
            enqueue: q(ENQUEUE),
            claim_batch: q(CLAIM_BATCH),
            complete_batch: q(COMPLETE_BATCH),
            now: q(NOW),
            audit: q(AUDIT),
            history: q(HISTORY),
            migrate_lock: q(MIGRATE_LOCK),
            migrate_setup: q(MIGRATE_SETUP),
            migrate_applied: q(MIGRATE_APPLIED),
            migrate_record: q(MIGRATE_RECORD),
            claim_many: q(CLAIM_MANY),
            get_many: q(GET_MANY),
            move_many: q(MOVE_MANY),
        }
    }

    pub(crate) async fn claim(
        &self,
        ex: &mut PgConnection,
        offset: i64,
        p: &OpClaim<'_>,
    ) -> Res<Option<Claim>> {
        let row = sqlx::query(&self.claim)
            .bind(offset)
            .bind(p.job_type)
            .bind(p.op_key)
            .bind(p.owner)
            .bind(p.fingerprint)
            .bind(p.payload)
            .bind(millis(p.lease))
            .fetch_optional(ex)
            .await?;
        row.as_ref().map(claim_from_row).transpose()
    }

    pub(crate) async fn take_over(
        &self,
        ex: &mut PgConnection,
        offset: i64,
        p: &OpTakeOver<'_>,
    ) -> Res<Option<Claim>> {
        let row = sqlx::query(&self.take_over)
            .bind(offset)
            .bind(p.job_type)
            .bind(p.op_key)
            .bind(p.stale_token)
            .bind(p.to.as_str())
            .bind(p.owner)
            .bind(millis(p.lease))
            .bind(p.reason)
            .fetch_optional(ex)
            .await?;
        row.as_ref().map(claim_from_row).transpose()
    }

    /// Returns the affected-row count: 1 moved, 0 not ours or not in `from`.
    pub(crate) async fn move_op(
        &self,
        ex: &mut PgConnection,
        offset: i64,
        p: &OpMove<'_>,
    ) -> Res<u64> {
        let done = sqlx::query(&self.move_op)
            .bind(offset)
            .bind(p.job_type)
            .bind(p.op_key)
            .bind(p.token)
            .bind(p.from.as_str())
            .bind(p.to.as_str())
            .bind(p.external_ref)
            .bind(p.result)
            .bind(p.error)
            .bind(p.unless_cancel_requested)
            .bind(p.retry_after.map_or(0, millis))
            .execute(ex)
            .await?;
        Ok(done.rows_affected())
    }

    /// Returns the keys completed. `ex` must be in a transaction of its own
    /// (the statement's plan is pinned with `SET LOCAL`).
    pub(crate) async fn complete_batch(
        &self,
        ex: &mut PgConnection,
        offset: i64,
        p: &OpCompleteBatch<'_>,
    ) -> Res<Vec<String>> {
        let keys: Vec<&str> = p.items.iter().map(|c| c.op_key).collect();
        let tokens: Vec<i64> = p.items.iter().map(|c| c.token).collect();
        let refs: Vec<Option<&str>> = p.items.iter().map(|c| c.external_ref).collect();
        let results: Vec<&str> = p.items.iter().map(|c| c.result).collect();
        sqlx::query(NO_NESTED_LOOP).execute(&mut *ex).await?;
        let rows = sqlx::query(&self.complete_batch)
            .bind(offset)
            .bind(p.job_type)
            .bind(&keys)
            .bind(&tokens)
            .bind(&refs)
            .bind(&results)
            .fetch_all(ex)
            .await?;
        rows.iter().map(|r| r.try_get("op_key")).collect()
    }

    pub(crate) async fn heartbeat(
        &self,
        ex: &mut PgConnection,
        offset: i64,
        p: &OpHeartbeat<'_>,
    ) -> Res<Option<Heartbeat>> {
        let row = sqlx::query(&self.heartbeat)
            .bind(offset)
            .bind(p.job_type)
            .bind(p.op_key)
            .bind(p.token)
            .bind(millis(p.lease))
            .fetch_optional(ex)
            .await?;
        row.map(|r| {
            Ok(Heartbeat {
                lease_until: DbTime(r.try_get("lease_until")?),
                cancel_requested: r.try_get("cancel_requested")?,
            })
        })
        .transpose()
    }

    /// Returns the affected-row count: 1 requested, 0 not that live claim.
    pub(crate) async fn request_cancel(
        &self,
        ex: &mut PgConnection,
        offset: i64,
        p: &OpRequestCancel<'_>,
    ) -> Res<u64> {
        let done = sqlx::query(&self.request_cancel)
            .bind(offset)
            .bind(p.job_type)
            .bind(p.op_key)
            .bind(p.token)
            .execute(ex)
            .await?;
        Ok(done.rows_affected())
    }

    pub(crate) async fn get(
        &self,
        ex: &mut PgConnection,
        offset: i64,
        job_type: &str,
        op_key: &str,
    ) -> Res<Option<Snapshot>> {
        let row = sqlx::query(&self.get)
            .bind(offset)
            .bind(job_type)
            .bind(op_key)
            .fetch_optional(ex)
            .await?;
        row.as_ref().map(snapshot_from_row).transpose()
    }

    pub(crate) async fn list(
        &self,
        ex: &mut PgConnection,
        offset: i64,
        p: &OpList<'_>,
    ) -> Res<Vec<Record>> {
        let rows = sqlx::query(&self.list)
            .bind(offset)
            .bind(p.job_type)
            .bind(p.state.map(|s| s.as_str()))
            .bind(p.lease_expired)
            .bind(p.limit.map(i64::from))
            .fetch_all(ex)
            .await?;
        rows.iter().map(record_from_row).collect()
    }

    /// Returns the affected-row count: how many records were deleted.
    pub(crate) async fn purge(
        &self,
        ex: &mut PgConnection,
        offset: i64,
        p: &OpPurge<'_>,
    ) -> Res<u64> {
        let done = sqlx::query(&self.purge)
            .bind(offset)
            .bind(p.job_type)
            .bind(millis(p.older_than))
            .execute(ex)
            .await?;
        Ok(done.rows_affected())
    }

    /// Deletes the audit rows whose record is gone; returns how many.
    pub(crate) async fn purge_audit(
        &self,
        ex: &mut PgConnection,
        job_type: Option<&str>,
    ) -> Res<u64> {
        let done = sqlx::query(&self.purge_audit)
            .bind(job_type)
            .execute(ex)
            .await?;
        Ok(done.rows_affected())
    }

    /// Returns the affected-row count: 1 inserted, 0 the record existed.
    pub(crate) async fn enqueue(
        &self,
        ex: &mut PgConnection,
        offset: i64,
        p: &OpEnqueue<'_>,
    ) -> Res<u64> {
        let done = sqlx::query(&self.enqueue)
            .bind(offset)
            .bind(p.job_type)
            .bind(p.op_key)
            .bind(p.fingerprint)
            .bind(p.payload)
            .bind(p.delay.map_or(0, millis))
            .execute(ex)
            .await?;
        Ok(done.rows_affected())
    }

    pub(crate) async fn claim_batch(
        &self,
        ex: &mut PgConnection,
        offset: i64,
        p: &OpClaimBatch<'_>,
    ) -> Res<Vec<(Record, Claim)>> {
        let rows = sqlx::query(&self.claim_batch)
            .bind(offset)
            .bind(p.job_type)
            .bind(p.owner)
            .bind(millis(p.lease))
            .bind(i64::from(p.limit))
            .fetch_all(ex)
            .await?;
        rows.iter()
            .map(|r| Ok((record_from_row(r)?, claim_from_row(r)?)))
            .collect()
    }

    pub(crate) async fn now(&self, ex: &mut PgConnection, offset: i64) -> Res<DbTime> {
        let row = sqlx::query(&self.now).bind(offset).fetch_one(ex).await?;
        Ok(DbTime(row.try_get("now")?))
    }

    /// Returns the affected-row count: 1 appended.
    pub(crate) async fn audit(
        &self,
        ex: &mut PgConnection,
        offset: i64,
        p: &OpAudit<'_>,
    ) -> Res<u64> {
        let done = sqlx::query(&self.audit)
            .bind(offset)
            .bind(p.job_type)
            .bind(p.op_key)
            .bind(p.event.as_str())
            .bind(p.actor)
            .bind(p.token)
            .bind(p.from.map(|s| s.as_str()))
            .bind(p.to.map(|s| s.as_str()))
            .bind(p.detail)
            .bind(p.attempt)
            .bind(p.retry_after.map(millis))
            .execute(ex)
            .await?;
        Ok(done.rows_affected())
    }

    pub(crate) async fn history(
        &self,
        ex: &mut PgConnection,
        job_type: &str,
        op_key: &str,
    ) -> Res<Vec<AuditEvent>> {
        let rows = sqlx::query(&self.history)
            .bind(job_type)
            .bind(op_key)
            .fetch_all(ex)
            .await?;
        rows.iter().map(audit_from_row).collect()
    }

    /// Claims every operation of `c` in one statement (`c`: each key once,
    /// sorted). Returns the rows claimed: job type, key and the claim.
    pub(crate) async fn claim_many(
        &self,
        ex: &mut PgConnection,
        offset: i64,
        c: &ClaimColumns<'_>,
    ) -> Res<Vec<(String, String, Claim)>> {
        let rows = sqlx::query(&self.claim_many)
            .bind(offset)
            .bind(&c.job_types)
            .bind(&c.op_keys)
            .bind(&c.owners)
            .bind(&c.fingerprints)
            .bind(&c.payloads)
            .bind(&c.leases)
            .fetch_all(ex)
            .await?;
        rows.iter()
            .map(|r| {
                Ok((
                    r.try_get("job_type")?,
                    r.try_get("op_key")?,
                    claim_from_row(r)?,
                ))
            })
            .collect()
    }

    /// The records of the (job type, key) pairs that exist.
    pub(crate) async fn get_many(
        &self,
        ex: &mut PgConnection,
        offset: i64,
        job_types: &[&str],
        op_keys: &[&str],
    ) -> Res<Vec<Snapshot>> {
        let rows = sqlx::query(&self.get_many)
            .bind(offset)
            .bind(job_types)
            .bind(op_keys)
            .fetch_all(ex)
            .await?;
        rows.iter().map(snapshot_from_row).collect()
    }

    /// Moves every operation of `m` in one statement (`m`: each key once,
    /// sorted). Returns the (job type, key) of the rows moved.
    pub(crate) async fn move_many(
        &self,
        ex: &mut PgConnection,
        offset: i64,
        m: &MoveColumns<'_>,
    ) -> Res<Vec<(String, String)>> {
        let rows = sqlx::query(&self.move_many)
            .bind(offset)
            .bind(&m.job_types)
            .bind(&m.op_keys)
            .bind(&m.tokens)
            .bind(&m.from)
            .bind(&m.to)
            .bind(&m.external_refs)
            .bind(&m.results)
            .bind(&m.errors)
            .bind(&m.unless_cancel_requested)
            .bind(&m.retry_after)
            .fetch_all(ex)
            .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("job_type")?, r.try_get("op_key")?)))
            .collect()
    }

    /// Inside the caller's transaction: takes the migration lock `lock_key`,
    /// creates the schema and its migrations table, and applies the
    /// migrations not yet recorded there. Returns how many it applied.
    pub(crate) async fn migrate(
        &self,
        conn: &mut PgConnection,
        lock_key: i64,
        migrations: &[Migration],
    ) -> Res<u64> {
        sqlx::query(&self.migrate_lock)
            .bind(lock_key)
            .execute(&mut *conn)
            .await?;
        conn.execute(self.migrate_setup.as_str()).await?;
        let mut applied = 0;
        for m in migrations {
            let done = sqlx::query(&self.migrate_applied)
                .bind(m.version)
                .fetch_optional(&mut *conn)
                .await?;
            if done.is_some() {
                continue;
            }
            let sql = in_schema(m.sql, &self.schema);
            conn.execute(sql.as_str()).await?;
            sqlx::query(&self.migrate_record)
                .bind(m.version)
                .bind(m.name)
                .execute(&mut *conn)
                .await?;
            applied += 1;
        }
        Ok(applied)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_replaces_whole_identifiers_only() {
        assert_eq!(
            in_schema(
                "SELECT * FROM onceonly.ops; CREATE SCHEMA IF NOT EXISTS onceonly;",
                "billing"
            ),
            r#"SELECT * FROM "billing".ops; CREATE SCHEMA IF NOT EXISTS "billing";"#
        );
        assert_eq!(
            in_schema("onceonly_x xonceonly \"onceonly\"", "b"),
            "onceonly_x xonceonly \"onceonly\""
        );
        assert_eq!(in_schema("onceonly", "b"), "\"b\"");
    }

    #[test]
    fn every_query_names_the_schema() {
        let q = Queries::new("t_1");
        for sql in [
            &q.claim,
            &q.take_over,
            &q.move_op,
            &q.heartbeat,
            &q.request_cancel,
            &q.get,
            &q.list,
            &q.purge,
            &q.enqueue,
            &q.claim_batch,
            &q.audit,
            &q.history,
            &q.migrate_setup,
            &q.migrate_applied,
            &q.migrate_record,
            &q.claim_many,
            &q.get_many,
            &q.move_many,
        ] {
            assert!(sql.contains(r#""t_1"."#), "{sql}");
            assert!(!sql.contains("onceonly"), "{sql}");
        }
        for m in crate::MIGRATIONS {
            let sql = in_schema(m.sql, "t_1");
            assert!(
                sql.contains(r#""t_1"."#) && !sql.contains("onceonly"),
                "{sql}"
            );
        }
    }
}
