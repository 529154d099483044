//! One thin function per query file; each returns what the database did,
//! affected-row counts included, and decides nothing.
//!
//! MySQL binds `?` by position: each file's header lists its binds in
//! order. The database's clock is read in the statement (`NOW(6)` plus the
//! store's offset), except for the claim, which binds a `now` read just
//! before so that it knows the claim it wrote without reading it back.

use onceonly::store::{
    Completion, OpAudit, OpClaim, OpEnqueue, OpHeartbeat, OpList, OpMove, OpPurge, OpRequestCancel,
    OpTakeOver,
};
use onceonly::{AuditEvent, DbTime, Record, Snapshot};
use onceonly_sqlx::{
    audit_from_row, claim_from_row, millis, record_from_row, snapshot_from_row, Migration,
};
use sqlx::{Executor, MySqlConnection, Row};

const NOW: &str = include_str!("../queries/now.sql");
const CLAIM_INSERT: &str = include_str!("../queries/claim_insert.sql");
const CLAIM_UPDATE: &str = include_str!("../queries/claim_update.sql");
const TAKE_OVER: &str = include_str!("../queries/take_over.sql");
const TAKE_OVER_READ: &str = include_str!("../queries/take_over_read.sql");
const MOVE: &str = include_str!("../queries/move.sql");
const COMPLETE: &str = include_str!("../queries/complete.sql");
const HEARTBEAT: &str = include_str!("../queries/heartbeat.sql");
const HEARTBEAT_READ: &str = include_str!("../queries/heartbeat_read.sql");
const REQUEST_CANCEL: &str = include_str!("../queries/request_cancel.sql");
const GET: &str = include_str!("../queries/get.sql");
const GET_LATEST: &str = include_str!("../queries/get_latest.sql");
const GET_LOCKED: &str = include_str!("../queries/get_locked.sql");
const RECORD: &str = include_str!("../queries/record.sql");
const LIST: &str = include_str!("../queries/list.sql");
const PURGE: &str = include_str!("../queries/purge.sql");
const PURGE_AUDIT: &str = include_str!("../queries/purge_audit.sql");
const ENQUEUE: &str = include_str!("../queries/enqueue.sql");
const CLAIM_BATCH_PICK: &str = include_str!("../queries/claim_batch_pick.sql");
const CLAIM_QUEUED: &str = include_str!("../queries/claim_queued.sql");
const AUDIT: &str = include_str!("../queries/audit.sql");
const HISTORY: &str = include_str!("../queries/history.sql");
const MIGRATE_LOCK: &str = include_str!("../queries/migrate_lock.sql");
const MIGRATE_UNLOCK: &str = include_str!("../queries/migrate_unlock.sql");
const MIGRATE_SETUP: &str = include_str!("../queries/migrate_setup.sql");
const MIGRATE_APPLIED: &str = include_str!("../queries/migrate_applied.sql");
const MIGRATE_RECORD: &str = include_str!("../queries/migrate_record.sql");

/// The text of the statements that decide who acts, for tests that run them
/// through another driver (the `mysql` client, without CLIENT_FOUND_ROWS).
pub mod deciding {
    /// Claim of an existing queued record, fenced on the token read.
    pub const CLAIM_UPDATE: &str = super::CLAIM_UPDATE;
    /// A fenced transition (the owner's completion among them).
    pub const MOVE: &str = super::MOVE;
    /// One completion of a batch.
    pub const COMPLETE: &str = super::COMPLETE;
}

type Res<T> = Result<T, sqlx::Error>;

/// LIMIT for "no limit": MySQL has no `LIMIT ALL`.
const NO_LIMIT: i64 = i64::MAX;

/// The database's clock in ms, plus `offset`.
pub(crate) async fn now(ex: &mut MySqlConnection, offset: i64) -> Res<i64> {
    sqlx::query_scalar(NOW).bind(offset).fetch_one(ex).await
}

/// Inserts the record claimed at `now`: 1 inserted; a duplicate key is an
/// error (see [`crate::errors::is_duplicate`]).
pub(crate) async fn claim_insert(ex: &mut MySqlConnection, now: i64, p: &OpClaim<'_>) -> Res<u64> {
    let done = sqlx::query(CLAIM_INSERT)
        .bind(p.job_type)
        .bind(p.op_key)
        .bind(p.owner)
        .bind(p.fingerprint)
        .bind(p.payload)
        .bind(now)
        .bind(now.saturating_add(millis(p.lease)))
        .bind(now)
        .bind(now)
        .execute(ex)
        .await?;
    Ok(done.rows_affected())
}

/// Claims the existing queued record still at `token`: 1 claimed, 0 not.
pub(crate) async fn claim_update(
    ex: &mut MySqlConnection,
    now: i64,
    p: &OpClaim<'_>,
    token: i64,
) -> Res<u64> {
    let done = sqlx::query(CLAIM_UPDATE)
        .bind(p.owner)
        .bind(now)
        .bind(now.saturating_add(millis(p.lease)))
        .bind(now)
        .bind(p.job_type)
        .bind(p.op_key)
        .bind(token)
        .bind(p.fingerprint)
        .bind(now)
        .execute(ex)
        .await?;
    Ok(done.rows_affected())
}

/// Takes over a stale claim: 1 taken, 0 not.
pub(crate) async fn take_over(
    ex: &mut MySqlConnection,
    offset: i64,
    p: &OpTakeOver<'_>,
) -> Res<u64> {
    let done = sqlx::query(TAKE_OVER)
        .bind(offset)
        .bind(p.to.as_str())
        .bind(p.owner)
        .bind(millis(p.lease))
        .bind(p.reason)
        .bind(p.job_type)
        .bind(p.op_key)
        .bind(p.stale_token)
        .execute(ex)
        .await?;
    Ok(done.rows_affected())
}

/// The claim a take-over just wrote (its transaction holds the row).
pub(crate) async fn take_over_read(
    ex: &mut MySqlConnection,
    job_type: &str,
    op_key: &str,
    token: i64,
) -> Res<Option<onceonly::store::Claim>> {
    let row = sqlx::query(TAKE_OVER_READ)
        .bind(job_type)
        .bind(op_key)
        .bind(token)
        .fetch_optional(ex)
        .await?;
    row.as_ref().map(claim_from_row).transpose()
}

/// Returns the affected-row count: 1 moved, 0 not ours or not in `from`.
pub(crate) async fn move_op(ex: &mut MySqlConnection, offset: i64, p: &OpMove<'_>) -> Res<u64> {
    let done = sqlx::query(MOVE)
        .bind(offset)
        .bind(p.to.as_str())
        .bind(p.external_ref)
        .bind(p.result)
        .bind(p.error)
        .bind(p.retry_after.map_or(0, millis))
        .bind(p.job_type)
        .bind(p.op_key)
        .bind(p.token)
        .bind(p.from.as_str())
        .bind(p.unless_cancel_requested)
        .execute(ex)
        .await?;
    Ok(done.rows_affected())
}

/// One completion of a batch: 1 completed, 0 not ours (or cancel requested).
pub(crate) async fn complete(
    ex: &mut MySqlConnection,
    offset: i64,
    job_type: &str,
    c: &Completion<'_>,
) -> Res<u64> {
    let done = sqlx::query(COMPLETE)
        .bind(offset)
        .bind(c.external_ref)
        .bind(c.result)
        .bind(job_type)
        .bind(c.op_key)
        .bind(c.token)
        .execute(ex)
        .await?;
    Ok(done.rows_affected())
}

/// Renews a lease: 1 renewed, 0 not that live claim.
pub(crate) async fn heartbeat(
    ex: &mut MySqlConnection,
    offset: i64,
    p: &OpHeartbeat<'_>,
) -> Res<u64> {
    let done = sqlx::query(HEARTBEAT)
        .bind(offset)
        .bind(millis(p.lease))
        .bind(p.job_type)
        .bind(p.op_key)
        .bind(p.token)
        .execute(ex)
        .await?;
    Ok(done.rows_affected())
}

/// The lease a heartbeat just wrote and whether a cancel is requested.
pub(crate) async fn heartbeat_read(
    ex: &mut MySqlConnection,
    p: &OpHeartbeat<'_>,
) -> Res<Option<onceonly::store::Heartbeat>> {
    let row = sqlx::query(HEARTBEAT_READ)
        .bind(p.job_type)
        .bind(p.op_key)
        .bind(p.token)
        .fetch_optional(ex)
        .await?;
    row.map(|r| {
        Ok(onceonly::store::Heartbeat {
            lease_until: DbTime(r.try_get("lease_until")?),
            cancel_requested: r.try_get("cancel_requested")?,
        })
    })
    .transpose()
}

/// Returns the affected-row count: 1 requested, 0 not that live claim.
pub(crate) async fn request_cancel(
    ex: &mut MySqlConnection,
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

/// One record with the database's time; `latest` reads the newest committed
/// row (a locking read) rather than the transaction's snapshot.
pub(crate) async fn get(
    ex: &mut MySqlConnection,
    offset: i64,
    job_type: &str,
    op_key: &str,
    latest: bool,
) -> Res<Option<Snapshot>> {
    let row = sqlx::query(if latest { GET_LATEST } else { GET })
        .bind(offset)
        .bind(job_type)
        .bind(op_key)
        .fetch_optional(ex)
        .await?;
    row.as_ref().map(snapshot_from_row).transpose()
}

/// One record, the newest committed row, locked exclusively until the
/// transaction ends (for a claim in the user's transaction of a record that
/// exists: see get_locked.sql).
pub(crate) async fn get_locked(
    ex: &mut MySqlConnection,
    offset: i64,
    job_type: &str,
    op_key: &str,
) -> Res<Option<Snapshot>> {
    let row = sqlx::query(GET_LOCKED)
        .bind(offset)
        .bind(job_type)
        .bind(op_key)
        .fetch_optional(ex)
        .await?;
    row.as_ref().map(snapshot_from_row).transpose()
}

/// One record as this transaction sees it (its own writes included).
pub(crate) async fn record(
    ex: &mut MySqlConnection,
    job_type: &str,
    op_key: &str,
) -> Res<Option<Record>> {
    let row = sqlx::query(RECORD)
        .bind(job_type)
        .bind(op_key)
        .fetch_optional(ex)
        .await?;
    row.as_ref().map(record_from_row).transpose()
}

pub(crate) async fn list(
    ex: &mut MySqlConnection,
    offset: i64,
    p: &OpList<'_>,
) -> Res<Vec<Record>> {
    let state = p.state.map(|s| s.as_str());
    let rows = sqlx::query(LIST)
        .bind(offset)
        .bind(p.job_type)
        .bind(p.job_type)
        .bind(state)
        .bind(state)
        .bind(p.lease_expired)
        .bind(p.limit.map_or(NO_LIMIT, i64::from))
        .fetch_all(ex)
        .await?;
    rows.iter().map(record_from_row).collect()
}

/// Returns the affected-row count: how many records were deleted.
pub(crate) async fn purge(ex: &mut MySqlConnection, offset: i64, p: &OpPurge<'_>) -> Res<u64> {
    let done = sqlx::query(PURGE)
        .bind(offset)
        .bind(p.job_type)
        .bind(p.job_type)
        .bind(millis(p.older_than))
        .execute(ex)
        .await?;
    Ok(done.rows_affected())
}

/// Deletes the audit rows whose record is gone; returns how many.
pub(crate) async fn purge_audit(ex: &mut MySqlConnection, job_type: Option<&str>) -> Res<u64> {
    let done = sqlx::query(PURGE_AUDIT)
        .bind(job_type)
        .bind(job_type)
        .execute(ex)
        .await?;
    Ok(done.rows_affected())
}

/// Inserts a queued record: 1 inserted; a duplicate key is an error.
pub(crate) async fn enqueue(ex: &mut MySqlConnection, offset: i64, p: &OpEnqueue<'_>) -> Res<u64> {
    let done = sqlx::query(ENQUEUE)
        .bind(p.job_type)
        .bind(p.op_key)
        .bind(p.fingerprint)
        .bind(p.payload)
        .bind(p.delay.map_or(0, millis))
        .bind(offset)
        .execute(ex)
        .await?;
    Ok(done.rows_affected())
}

/// Locks up to `limit` due queued keys of `job_type`, skipping locked rows.
pub(crate) async fn claim_batch_pick(
    ex: &mut MySqlConnection,
    offset: i64,
    job_type: &str,
    limit: u32,
) -> Res<Vec<String>> {
    sqlx::query_scalar(CLAIM_BATCH_PICK)
        .bind(job_type)
        .bind(offset)
        .bind(i64::from(limit))
        .fetch_all(ex)
        .await
}

/// Claims one picked queued row: 1 claimed, 0 no longer queued.
pub(crate) async fn claim_queued(
    ex: &mut MySqlConnection,
    offset: i64,
    owner: &str,
    lease: std::time::Duration,
    job_type: &str,
    op_key: &str,
) -> Res<u64> {
    let done = sqlx::query(CLAIM_QUEUED)
        .bind(offset)
        .bind(owner)
        .bind(millis(lease))
        .bind(job_type)
        .bind(op_key)
        .execute(ex)
        .await?;
    Ok(done.rows_affected())
}

/// Returns the affected-row count: 1 appended.
pub(crate) async fn audit(ex: &mut MySqlConnection, offset: i64, p: &OpAudit<'_>) -> Res<u64> {
    let done = sqlx::query(AUDIT)
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
        .bind(offset)
        .execute(ex)
        .await?;
    Ok(done.rows_affected())
}

pub(crate) async fn history(
    ex: &mut MySqlConnection,
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

/// Takes the database's migration lock (waiting up to `wait_secs`), creates
/// the migrations table, applies the migrations not yet recorded, and
/// releases the lock. Returns how many it applied. DDL commits at once in
/// MySQL, so each migration must be idempotent on its own (IF NOT EXISTS).
pub(crate) async fn migrate(
    conn: &mut MySqlConnection,
    wait_secs: i64,
    migrations: &[Migration],
) -> Res<Option<u64>> {
    let got: Option<i64> = sqlx::query_scalar(MIGRATE_LOCK)
        .bind(wait_secs)
        .fetch_one(&mut *conn)
        .await?;
    if got != Some(1) {
        return Ok(None);
    }
    let applied = apply(conn, migrations).await;
    // Released whatever happened; a dropped connection releases it too.
    let released = sqlx::query(MIGRATE_UNLOCK).execute(&mut *conn).await;
    let applied = applied?;
    released?;
    Ok(Some(applied))
}

async fn apply(conn: &mut MySqlConnection, migrations: &[Migration]) -> Res<u64> {
    conn.execute(MIGRATE_SETUP).await?;
    let mut applied = 0;
    for m in migrations {
        let done = sqlx::query(MIGRATE_APPLIED)
            .bind(m.version)
            .fetch_optional(&mut *conn)
            .await?;
        if done.is_some() {
            continue;
        }
        // One statement per file: sent as text, as DDL must be.
        conn.execute(m.sql).await?;
        sqlx::query(MIGRATE_RECORD)
            .bind(m.version)
            .bind(m.name)
            .execute(&mut *conn)
            .await?;
        applied += 1;
    }
    Ok(applied)
}
