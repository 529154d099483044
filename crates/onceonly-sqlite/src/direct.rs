//! Running a [`Query`] on the store's own rusqlite connection (inside the
//! writer thread) and decoding its rows. The sqlx twin, for the user's
//! transaction, is [`crate::in_tx`]; both decode with [`onceonly::columns`].

use onceonly::columns::{self, Columns};
use onceonly::store::{Claim, Heartbeat};
use onceonly::{AuditEvent, DbTime, Record, Snapshot};
use rusqlite::types::Type;
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

/// A rusqlite row as [`Columns`], for the shared decoders.
struct RusqliteRow<'a, 'r>(&'a Row<'r>);

impl Columns for RusqliteRow<'_, '_> {
    type Error = rusqlite::Error;

    fn int(&self, col: &'static str) -> Res<i64> {
        self.0.get(col)
    }

    fn opt_int(&self, col: &'static str) -> Res<Option<i64>> {
        self.0.get(col)
    }

    fn flag(&self, col: &'static str) -> Res<bool> {
        self.0.get(col)
    }

    fn text(&self, col: &'static str) -> Res<String> {
        self.0.get(col)
    }

    fn opt_text(&self, col: &'static str) -> Res<Option<String>> {
        self.0.get(col)
    }

    fn invalid(&self, col: &'static str, why: onceonly::Error) -> rusqlite::Error {
        let index = self.0.as_ref().column_index(col).unwrap_or(0);
        rusqlite::Error::FromSqlConversionFailure(index, Type::Text, Box::new(why))
    }
}

pub(crate) fn claim(row: &Row<'_>) -> Res<Claim> {
    columns::claim(&RusqliteRow(row))
}

pub(crate) fn record(row: &Row<'_>) -> Res<Record> {
    columns::record(&RusqliteRow(row))
}

pub(crate) fn snapshot(row: &Row<'_>) -> Res<Snapshot> {
    columns::snapshot(&RusqliteRow(row))
}

pub(crate) fn heartbeat(row: &Row<'_>) -> Res<Heartbeat> {
    columns::heartbeat(&RusqliteRow(row))
}

pub(crate) fn audit_event(row: &Row<'_>) -> Res<AuditEvent> {
    columns::audit_event(&RusqliteRow(row))
}

pub(crate) fn now(row: &Row<'_>) -> Res<DbTime> {
    Ok(DbTime(row.get("now")?))
}
