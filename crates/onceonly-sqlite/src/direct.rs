//! Running a [`Query`] on the store's own rusqlite connection (inside the
//! writer thread) and decoding its rows. The sqlx twin, for the user's
//! transaction, is [`crate::in_tx`]; the row shapes are those of
//! `onceonly_sqlx`'s decoders.

use onceonly::store::{Claim, Heartbeat};
use onceonly::{AuditEvent, DbTime, Record, Snapshot, State};
use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ValueRef};
use rusqlite::{params_from_iter, Connection, OptionalExtension, Row};

use crate::queries::Query;

type Res<T> = rusqlite::Result<T>;

/// Runs a statement that returns no rows; the affected-row count.
pub(crate) fn execute(conn: &Connection, q: &Query) -> Res<u64> {
    let affected = conn
        .prepare_cached(q.sql)?
        .execute(params_from_iter(q.args.iter()))?;
    Ok(affected as u64)
}

/// The first row, decoded, if any.
pub(crate) fn optional<T>(
    conn: &Connection,
    q: &Query,
    decode: impl FnOnce(&Row<'_>) -> Res<T>,
) -> Res<Option<T>> {
    conn.prepare_cached(q.sql)?
        .query_row(params_from_iter(q.args.iter()), decode)
        .optional()
}

/// Every row, decoded.
pub(crate) fn all<T>(
    conn: &Connection,
    q: &Query,
    decode: impl FnMut(&Row<'_>) -> Res<T>,
) -> Res<Vec<T>> {
    conn.prepare_cached(q.sql)?
        .query_map(params_from_iter(q.args.iter()), decode)?
        .collect()
}

/// A state name as stored; anything else is a decode error naming it.
struct StateColumn(State);

impl FromSql for StateColumn {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        value
            .as_str()?
            .parse::<State>()
            .map(StateColumn)
            .map_err(|e| FromSqlError::Other(Box::new(e)))
    }
}

fn state(row: &Row<'_>, col: &str) -> Res<Option<State>> {
    Ok(row.get::<_, Option<StateColumn>>(col)?.map(|s| s.0))
}

fn time(row: &Row<'_>, col: &str) -> Res<Option<DbTime>> {
    Ok(row.get::<_, Option<i64>>(col)?.map(DbTime))
}

/// A `claim`-shaped row (`token, attempts, claimed_at, lease_until`).
pub(crate) fn claim(row: &Row<'_>) -> Res<Claim> {
    Ok(Claim {
        token: row.get("token")?,
        attempts: row.get("attempts")?,
        claimed_at: DbTime(row.get("claimed_at")?),
        lease_until: DbTime(row.get("lease_until")?),
    })
}

/// A full record row (every column of the ops table).
pub(crate) fn record(row: &Row<'_>) -> Res<Record> {
    Ok(Record {
        job_type: row.get("job_type")?,
        op_key: row.get("op_key")?,
        state: row.get::<_, StateColumn>("state")?.0,
        token: row.get("token")?,
        owner: row.get("owner")?,
        attempts: row.get("attempts")?,
        fingerprint: row.get("fingerprint")?,
        payload: row.get("payload")?,
        external_ref: row.get("external_ref")?,
        result: row.get("result")?,
        cancel_requested: row.get("cancel_requested")?,
        error: row.get("error")?,
        due_at: time(row, "due_at")?,
        claimed_at: time(row, "claimed_at")?,
        lease_until: time(row, "lease_until")?,
        created_at: DbTime(row.get("created_at")?),
        updated_at: DbTime(row.get("updated_at")?),
        completed_at: time(row, "completed_at")?,
    })
}

/// A record row that also carries the database's `now`.
pub(crate) fn snapshot(row: &Row<'_>) -> Res<Snapshot> {
    Ok(Snapshot {
        record: record(row)?,
        now: DbTime(row.get("now")?),
    })
}

pub(crate) fn heartbeat(row: &Row<'_>) -> Res<Heartbeat> {
    Ok(Heartbeat {
        lease_until: DbTime(row.get("lease_until")?),
        cancel_requested: row.get("cancel_requested")?,
    })
}

pub(crate) fn now(row: &Row<'_>) -> Res<DbTime> {
    Ok(DbTime(row.get("now")?))
}

/// An audit trail row.
pub(crate) fn audit_event(row: &Row<'_>) -> Res<AuditEvent> {
    let event: String = row.get("event")?;
    Ok(AuditEvent {
        id: row.get("id")?,
        job_type: row.get("job_type")?,
        op_key: row.get("op_key")?,
        at: DbTime(row.get("at")?),
        event: event.parse().map_err(|e: onceonly::Error| {
            rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(e))
        })?,
        actor: row.get("actor")?,
        token: row.get("token")?,
        from_state: state(row, "from_state")?,
        to_state: state(row, "to_state")?,
        detail: row.get("detail")?,
    })
}
