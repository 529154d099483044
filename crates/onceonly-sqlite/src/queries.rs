//! One thin function per query file; each returns what the database did,
//! affected-row counts included, and decides nothing.

use onceonly::store::{
    Claim, Heartbeat, OpAudit, OpClaim, OpClaimBatch, OpEnqueue, OpHeartbeat, OpList, OpMove,
    OpPurge, OpRequestCancel, OpTakeOver,
};
use onceonly::{AuditEvent, DbTime, Record, Snapshot};
use onceonly_sqlx::{
    audit_from_row, claim_from_row, millis, record_from_row, snapshot_from_row, Migration,
};
use sqlx::{Executor, Row, SqliteConnection};

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
const NOW: &str = include_str!("../queries/now.sql");
const AUDIT: &str = include_str!("../queries/audit.sql");
const HISTORY: &str = include_str!("../queries/history.sql");

type Res<T> = Result<T, sqlx::Error>;

pub(crate) async fn claim(
    ex: &mut SqliteConnection,
    offset: i64,
    p: &OpClaim<'_>,
) -> Res<Option<Claim>> {
    let row = sqlx::query(CLAIM)
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
    ex: &mut SqliteConnection,
    offset: i64,
    p: &OpTakeOver<'_>,
) -> Res<Option<Claim>> {
    let row = sqlx::query(TAKE_OVER)
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
pub(crate) async fn move_op(ex: &mut SqliteConnection, offset: i64, p: &OpMove<'_>) -> Res<u64> {
    let done = sqlx::query(MOVE)
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

pub(crate) async fn heartbeat(
    ex: &mut SqliteConnection,
    offset: i64,
    p: &OpHeartbeat<'_>,
) -> Res<Option<Heartbeat>> {
    let row = sqlx::query(HEARTBEAT)
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

pub(crate) async fn request_cancel(
    ex: &mut SqliteConnection,
    offset: i64,
    p: &OpRequestCancel<'_>,
) -> Res<u64> {
    let done = sqlx::query(REQUEST_CANCEL)
        .bind(offset)
        .bind(p.job_type)
        .bind(p.op_key)
        .bind(p.token)
        .execute(ex)
        .await?;
    Ok(done.rows_affected())
}

pub(crate) async fn get(
    ex: &mut SqliteConnection,
    offset: i64,
    job_type: &str,
    op_key: &str,
) -> Res<Option<Snapshot>> {
    let row = sqlx::query(GET)
        .bind(offset)
        .bind(job_type)
        .bind(op_key)
        .fetch_optional(ex)
        .await?;
    row.as_ref().map(snapshot_from_row).transpose()
}

pub(crate) async fn list(
    ex: &mut SqliteConnection,
    offset: i64,
    p: &OpList<'_>,
) -> Res<Vec<Record>> {
    let rows = sqlx::query(LIST)
        .bind(offset)
        .bind(p.job_type)
        .bind(p.state.map(|s| s.as_str()))
        .bind(p.lease_expired)
        .bind(p.limit.map_or(-1, i64::from))
        .fetch_all(ex)
        .await?;
    rows.iter().map(record_from_row).collect()
}

pub(crate) async fn purge(ex: &mut SqliteConnection, offset: i64, p: &OpPurge<'_>) -> Res<u64> {
    let done = sqlx::query(PURGE)
        .bind(offset)
        .bind(p.job_type)
        .bind(millis(p.older_than))
        .execute(ex)
        .await?;
    Ok(done.rows_affected())
}

/// Deletes the audit rows whose record is gone; returns how many.
pub(crate) async fn purge_audit(ex: &mut SqliteConnection, job_type: Option<&str>) -> Res<u64> {
    let done = sqlx::query(PURGE_AUDIT).bind(job_type).execute(ex).await?;
    Ok(done.rows_affected())
}

/// Returns the affected-row count: 1 inserted, 0 the record existed.
pub(crate) async fn enqueue(ex: &mut SqliteConnection, offset: i64, p: &OpEnqueue<'_>) -> Res<u64> {
    let done = sqlx::query(ENQUEUE)
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
    ex: &mut SqliteConnection,
    offset: i64,
    p: &OpClaimBatch<'_>,
) -> Res<Vec<(Record, Claim)>> {
    let rows = sqlx::query(CLAIM_BATCH)
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

pub(crate) async fn now(ex: &mut SqliteConnection, offset: i64) -> Res<DbTime> {
    let row = sqlx::query(NOW).bind(offset).fetch_one(ex).await?;
    Ok(DbTime(row.try_get("now")?))
}

/// Returns the affected-row count: 1 appended.
pub(crate) async fn audit(ex: &mut SqliteConnection, offset: i64, p: &OpAudit<'_>) -> Res<u64> {
    let done = sqlx::query(AUDIT)
        .bind(offset)
        .bind(p.job_type)
        .bind(p.op_key)
        .bind(p.event.as_str())
        .bind(p.actor)
        .bind(p.token)
        .bind(p.from.map(|s| s.as_str()))
        .bind(p.to.map(|s| s.as_str()))
        .bind(p.detail)
        .execute(ex)
        .await?;
    Ok(done.rows_affected())
}

pub(crate) async fn history(
    ex: &mut SqliteConnection,
    job_type: &str,
    op_key: &str,
) -> Res<Vec<AuditEvent>> {
    let rows = sqlx::query(HISTORY)
        .bind(job_type)
        .bind(op_key)
        .fetch_all(ex)
        .await?;
    rows.iter().map(audit_from_row).collect()
}

/// Applies the migrations not yet recorded in `onceonly_migrations`.
pub(crate) async fn migrate(conn: &mut SqliteConnection, migrations: &[Migration]) -> Res<()> {
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS onceonly_migrations (
             version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)",
    )
    .execute(&mut *conn)
    .await?;
    for m in migrations {
        let applied = sqlx::query("SELECT version FROM onceonly_migrations WHERE version = ?1")
            .bind(m.version)
            .fetch_optional(&mut *conn)
            .await?;
        if applied.is_some() {
            continue;
        }
        conn.execute(m.sql).await?;
        sqlx::query("INSERT INTO onceonly_migrations (version, name, applied_at) VALUES (?1, ?2, datetime('now'))")
            .bind(m.version)
            .bind(m.name)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}
