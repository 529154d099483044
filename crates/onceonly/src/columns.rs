//! Decoding the ops and audit tables' rows, once for every driver.
//!
//! A store implements [`Columns`] for its driver's row type (sqlx rows in
//! `onceonly-sqlx`, rusqlite rows in `onceonly-sqlite`); the column names and
//! what they mean live here, so the drivers cannot drift apart.

use crate::audit::AuditEvent;
use crate::record::{DbTime, Record, Snapshot, State};
use crate::store::{Claim, Heartbeat};

/// One row's columns, read by name.
pub trait Columns {
    /// The driver's error.
    type Error;
    /// An integer column.
    fn int(&self, col: &'static str) -> Result<i64, Self::Error>;
    /// A nullable integer column.
    fn opt_int(&self, col: &'static str) -> Result<Option<i64>, Self::Error>;
    /// A boolean column (an integer 0/1 where the database has no booleans).
    fn flag(&self, col: &'static str) -> Result<bool, Self::Error>;
    /// A text column.
    fn text(&self, col: &'static str) -> Result<String, Self::Error>;
    /// A nullable text column.
    fn opt_text(&self, col: &'static str) -> Result<Option<String>, Self::Error>;
    /// The error for a value the column cannot hold (an unknown state name).
    fn invalid(&self, col: &'static str, why: crate::Error) -> Self::Error;
}

fn time<C: Columns>(row: &C, col: &'static str) -> Result<Option<DbTime>, C::Error> {
    Ok(row.opt_int(col)?.map(DbTime))
}

fn state<C: Columns>(row: &C, col: &'static str) -> Result<Option<State>, C::Error> {
    row.opt_text(col)?
        .map(|s| s.parse::<State>().map_err(|e| row.invalid(col, e.into())))
        .transpose()
}

/// A `claim`-shaped row (`token, attempts, claimed_at, lease_until`).
pub fn claim<C: Columns>(row: &C) -> Result<Claim, C::Error> {
    Ok(Claim {
        token: row.int("token")?,
        attempts: row.int("attempts")?,
        claimed_at: DbTime(row.int("claimed_at")?),
        lease_until: DbTime(row.int("lease_until")?),
    })
}

/// A full record row (every column of the ops table).
pub fn record<C: Columns>(row: &C) -> Result<Record, C::Error> {
    let state_name = row.text("state")?;
    Ok(Record {
        job_type: row.text("job_type")?,
        op_key: row.text("op_key")?,
        state: state_name
            .parse::<State>()
            .map_err(|e| row.invalid("state", e.into()))?,
        token: row.int("token")?,
        owner: row.opt_text("owner")?,
        attempts: row.int("attempts")?,
        fingerprint: row.text("fingerprint")?,
        payload: row.opt_text("payload")?,
        external_ref: row.opt_text("external_ref")?,
        result: row.opt_text("result")?,
        cancel_requested: row.flag("cancel_requested")?,
        error: row.opt_text("error")?,
        due_at: time(row, "due_at")?,
        claimed_at: time(row, "claimed_at")?,
        lease_until: time(row, "lease_until")?,
        created_at: DbTime(row.int("created_at")?),
        updated_at: DbTime(row.int("updated_at")?),
        completed_at: time(row, "completed_at")?,
    })
}

/// A record row that also carries the database's `now`.
pub fn snapshot<C: Columns>(row: &C) -> Result<Snapshot, C::Error> {
    Ok(Snapshot {
        record: record(row)?,
        now: DbTime(row.int("now")?),
    })
}

/// A renewed lease (`lease_until, cancel_requested`).
pub fn heartbeat<C: Columns>(row: &C) -> Result<Heartbeat, C::Error> {
    Ok(Heartbeat {
        lease_until: DbTime(row.int("lease_until")?),
        cancel_requested: row.flag("cancel_requested")?,
    })
}

/// An audit trail row.
pub fn audit_event<C: Columns>(row: &C) -> Result<AuditEvent, C::Error> {
    Ok(AuditEvent {
        id: row.int("id")?,
        job_type: row.text("job_type")?,
        op_key: row.text("op_key")?,
        at: DbTime(row.int("at")?),
        event: row
            .text("event")?
            .parse()
            .map_err(|e| row.invalid("event", e))?,
        actor: row.text("actor")?,
        token: row.int("token")?,
        from_state: state(row, "from_state")?,
        to_state: state(row, "to_state")?,
        detail: row.opt_text("detail")?,
        attempt: row.opt_int("attempt")?,
        retry_after_ms: row.opt_int("retry_after_ms")?,
    })
}
