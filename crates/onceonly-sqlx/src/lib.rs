//! Plumbing shared by the sqlx stores (`onceonly-sqlite`, `onceonly-postgres`):
//! decoding a record row, mapping driver errors, and the migration list shape.
//! Everything that differs between databases (SQL text, locking) stays in
//! the store crates.
#![forbid(unsafe_code)]

use onceonly::{DbTime, Error, Record, Snapshot, State};
use sqlx::{ColumnIndex, Database, Decode, Row, Type};

/// One embedded migration: its number, its name and its SQL.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    /// Applied in increasing order; recorded once applied.
    pub version: i64,
    /// A short name for logs.
    pub name: &'static str,
    /// The statements, separated by `;`.
    pub sql: &'static str,
}

/// Maps a driver error to onceonly's error, naming the URL (redacted) when
/// the database could not be reached.
pub fn map_err(url: &str) -> impl Fn(sqlx::Error) -> Error + '_ {
    move |e| match e {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::Configuration(_) => Error::Unreachable {
            url: onceonly::db_url::redact(url),
            reason: e.to_string(),
        },
        sqlx::Error::Database(db) if is_connect_refusal(db.code().as_deref()) => {
            Error::Unreachable {
                url: onceonly::db_url::redact(url),
                reason: db.to_string(),
            }
        }
        other => Error::Database(other.to_string()),
    }
}

/// PostgreSQL refusals at connect time (no such database, role, auth).
fn is_connect_refusal(code: Option<&str>) -> bool {
    matches!(code, Some("3D000" | "28000" | "28P01" | "57P03"))
}

/// Milliseconds from a `Duration`, as the SQL binds them.
pub fn millis(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Decodes a `claim`-shaped row (`token, attempts, claimed_at, lease_until`).
pub fn claim_from_row<'r, R>(row: &'r R) -> Result<onceonly::store::Claim, sqlx::Error>
where
    R: Row,
    &'static str: ColumnIndex<R>,
    i64: Decode<'r, R::Database> + Type<R::Database>,
{
    Ok(onceonly::store::Claim {
        token: row.try_get("token")?,
        attempts: row.try_get("attempts")?,
        claimed_at: DbTime(row.try_get("claimed_at")?),
        lease_until: DbTime(row.try_get("lease_until")?),
    })
}

/// Decodes a full record row (every column of the ops table).
pub fn record_from_row<'r, R>(row: &'r R) -> Result<Record, sqlx::Error>
where
    R: Row,
    &'static str: ColumnIndex<R>,
    i64: Decode<'r, R::Database> + Type<R::Database>,
    bool: Decode<'r, R::Database> + Type<R::Database>,
    String: Decode<'r, R::Database> + Type<R::Database>,
    <R as Row>::Database: Database,
{
    let time = |col: &'static str| -> Result<Option<DbTime>, sqlx::Error> {
        Ok(row.try_get::<Option<i64>, _>(col)?.map(DbTime))
    };
    let state: String = row.try_get("state")?;
    Ok(Record {
        job_type: row.try_get("job_type")?,
        op_key: row.try_get("op_key")?,
        state: state
            .parse::<State>()
            .map_err(|e| sqlx::Error::Decode(e.to_string().into()))?,
        token: row.try_get("token")?,
        owner: row.try_get("owner")?,
        attempts: row.try_get("attempts")?,
        fingerprint: row.try_get("fingerprint")?,
        payload: row.try_get("payload")?,
        external_ref: row.try_get("external_ref")?,
        result: row.try_get("result")?,
        cancel_requested: row.try_get("cancel_requested")?,
        error: row.try_get("error")?,
        due_at: time("due_at")?,
        claimed_at: time("claimed_at")?,
        lease_until: time("lease_until")?,
        created_at: DbTime(row.try_get("created_at")?),
        updated_at: DbTime(row.try_get("updated_at")?),
        completed_at: time("completed_at")?,
    })
}

/// Decodes a record row that also carries the database's `now`.
pub fn snapshot_from_row<'r, R>(row: &'r R) -> Result<Snapshot, sqlx::Error>
where
    R: Row,
    &'static str: ColumnIndex<R>,
    i64: Decode<'r, R::Database> + Type<R::Database>,
    bool: Decode<'r, R::Database> + Type<R::Database>,
    String: Decode<'r, R::Database> + Type<R::Database>,
{
    Ok(Snapshot {
        record: record_from_row(row)?,
        now: DbTime(row.try_get("now")?),
    })
}

/// Decodes an audit trail row.
pub fn audit_from_row<'r, R>(row: &'r R) -> Result<onceonly::AuditEvent, sqlx::Error>
where
    R: Row,
    &'static str: ColumnIndex<R>,
    i64: Decode<'r, R::Database> + Type<R::Database>,
    String: Decode<'r, R::Database> + Type<R::Database>,
{
    let decode = |e: Error| sqlx::Error::Decode(e.to_string().into());
    let state = |col: &'static str| -> Result<Option<State>, sqlx::Error> {
        row.try_get::<Option<String>, _>(col)?
            .map(|s| s.parse::<State>().map_err(decode))
            .transpose()
    };
    let event: String = row.try_get("event")?;
    Ok(onceonly::AuditEvent {
        id: row.try_get("id")?,
        job_type: row.try_get("job_type")?,
        op_key: row.try_get("op_key")?,
        at: DbTime(row.try_get("at")?),
        event: event.parse().map_err(decode)?,
        actor: row.try_get("actor")?,
        token: row.try_get("token")?,
        from_state: state("from_state")?,
        to_state: state("to_state")?,
        detail: row.try_get("detail")?,
    })
}
