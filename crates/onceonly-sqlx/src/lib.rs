//! Plumbing shared by the sqlx stores (`onceonly-sqlite`, `onceonly-postgres`):
//! decoding a record row, mapping driver errors, and the migration list shape.
//! Everything that differs between databases (SQL text, locking) stays in
//! the store crates.
#![forbid(unsafe_code)]

pub mod test_db;

use onceonly::columns::{self, Columns};
use onceonly::{DbError, DbErrorKind, Error, Record, Snapshot};
use sqlx::{ColumnIndex, Decode, Row, Type};

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

/// Maps a driver error to onceonly's error: [`Error::Unreachable`], URL
/// redacted, when the database could not be reached; otherwise
/// [`Error::Db`] with its kind (constraint, serialization, timeout, other)
/// and the driver's error as its source.
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
        sqlx::Error::Database(ref db) => {
            let kind = match db_kind(db.kind(), db.code().as_deref()) {
                DbErrorKind::Other if is_missing_schema(db.message()) => DbErrorKind::Permanent,
                kind => kind,
            };
            Error::Db(DbError::new(kind, db.to_string(), e))
        }
        other => Error::Db(DbError::new(DbErrorKind::Other, other.to_string(), other)),
    }
}

/// The kind of a database's refusal, from sqlx's kind and the SQLSTATE
/// (PostgreSQL) or result code (SQLite).
pub fn db_kind(kind: sqlx::error::ErrorKind, code: Option<&str>) -> DbErrorKind {
    use sqlx::error::ErrorKind as K;
    match kind {
        K::UniqueViolation | K::ForeignKeyViolation | K::NotNullViolation | K::CheckViolation => {
            return DbErrorKind::Constraint
        }
        _ => {}
    }
    match code {
        // serialization_failure, deadlock_detected
        Some("40001" | "40P01") => DbErrorKind::Serialization,
        // query_canceled (statement_timeout), lock_not_available (lock_timeout)
        Some("57014" | "55P03") => DbErrorKind::Timeout,
        // read_only_sql_transaction, insufficient_privilege, undefined_table,
        // undefined_column, invalid_schema_name: a person must mend it.
        Some("25006" | "42501" | "42P01" | "42703" | "3F000") => DbErrorKind::Permanent,
        // SQLite: SQLITE_BUSY and SQLITE_LOCKED, with their extended codes;
        // SQLITE_PERM, SQLITE_READONLY and SQLITE_AUTH. (SQLite's codes have
        // at most 4 digits; a SQLSTATE always 5 characters.)
        Some(code) if code.len() < 5 => match code.parse::<i32>().map(|c| c & 0xff) {
            Ok(5 | 6) => DbErrorKind::Serialization,
            Ok(19) => DbErrorKind::Constraint,
            Ok(3 | 8 | 23) => DbErrorKind::Permanent,
            _ => DbErrorKind::Other,
        },
        Some(_) | None => DbErrorKind::Other,
    }
}

/// Whether SQLite's message says a table or column is missing (SQLite
/// gives it the generic code SQLITE_ERROR): the schema is not onceonly's.
pub fn is_missing_schema(message: &str) -> bool {
    message.contains("no such table") || message.contains("no such column")
}

/// PostgreSQL refusals at connect time (no such database, role, auth).
fn is_connect_refusal(code: Option<&str>) -> bool {
    matches!(code, Some("3D000" | "28000" | "28P01" | "57P03"))
}

/// Milliseconds from a `Duration`, as the SQL binds them.
pub fn millis(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// A sqlx row as [`Columns`], for the shared decoders.
struct SqlxRow<'r, R>(&'r R);

impl<'r, R> Columns for SqlxRow<'r, R>
where
    R: Row,
    &'static str: ColumnIndex<R>,
    i64: Decode<'r, R::Database> + Type<R::Database>,
    bool: Decode<'r, R::Database> + Type<R::Database>,
    String: Decode<'r, R::Database> + Type<R::Database>,
{
    type Error = sqlx::Error;

    fn int(&self, col: &'static str) -> Result<i64, sqlx::Error> {
        self.0.try_get(col)
    }

    fn opt_int(&self, col: &'static str) -> Result<Option<i64>, sqlx::Error> {
        self.0.try_get(col)
    }

    fn flag(&self, col: &'static str) -> Result<bool, sqlx::Error> {
        self.0.try_get(col)
    }

    fn text(&self, col: &'static str) -> Result<String, sqlx::Error> {
        self.0.try_get(col)
    }

    fn opt_text(&self, col: &'static str) -> Result<Option<String>, sqlx::Error> {
        self.0.try_get(col)
    }

    fn invalid(&self, col: &'static str, why: Error) -> sqlx::Error {
        sqlx::Error::ColumnDecode {
            index: col.to_owned(),
            source: Box::new(why),
        }
    }
}

/// Decodes a `claim`-shaped row (`token, attempts, claimed_at, lease_until`).
pub fn claim_from_row<'r, R>(row: &'r R) -> Result<onceonly::store::Claim, sqlx::Error>
where
    R: Row,
    &'static str: ColumnIndex<R>,
    i64: Decode<'r, R::Database> + Type<R::Database>,
    bool: Decode<'r, R::Database> + Type<R::Database>,
    String: Decode<'r, R::Database> + Type<R::Database>,
{
    columns::claim(&SqlxRow(row))
}

/// Decodes a full record row (every column of the ops table).
pub fn record_from_row<'r, R>(row: &'r R) -> Result<Record, sqlx::Error>
where
    R: Row,
    &'static str: ColumnIndex<R>,
    i64: Decode<'r, R::Database> + Type<R::Database>,
    bool: Decode<'r, R::Database> + Type<R::Database>,
    String: Decode<'r, R::Database> + Type<R::Database>,
{
    columns::record(&SqlxRow(row))
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
    columns::snapshot(&SqlxRow(row))
}

/// Decodes an audit trail row.
pub fn audit_from_row<'r, R>(row: &'r R) -> Result<onceonly::AuditEvent, sqlx::Error>
where
    R: Row,
    &'static str: ColumnIndex<R>,
    i64: Decode<'r, R::Database> + Type<R::Database>,
    bool: Decode<'r, R::Database> + Type<R::Database>,
    String: Decode<'r, R::Database> + Type<R::Database>,
{
    columns::audit_event(&SqlxRow(row))
}

#[cfg(test)]
mod kind_tests {
    use super::*;
    use sqlx::error::ErrorKind as K;

    #[test]
    fn refusals_map_to_their_kind() {
        let cases = [
            (K::UniqueViolation, Some("23505"), DbErrorKind::Constraint),
            (K::NotNullViolation, Some("23502"), DbErrorKind::Constraint),
            (K::Other, Some("40001"), DbErrorKind::Serialization),
            (K::Other, Some("40P01"), DbErrorKind::Serialization),
            (K::Other, Some("57014"), DbErrorKind::Timeout),
            (K::Other, Some("55P03"), DbErrorKind::Timeout),
            // SQLite: BUSY, BUSY_SNAPSHOT (517), LOCKED, CONSTRAINT_UNIQUE (2067)
            (K::Other, Some("5"), DbErrorKind::Serialization),
            (K::Other, Some("517"), DbErrorKind::Serialization),
            (K::Other, Some("6"), DbErrorKind::Serialization),
            (K::Other, Some("2067"), DbErrorKind::Constraint),
            (K::Other, Some("1"), DbErrorKind::Other),
            // read-only, privilege, missing table: PostgreSQL and SQLite
            (K::Other, Some("25006"), DbErrorKind::Permanent),
            (K::Other, Some("42501"), DbErrorKind::Permanent),
            (K::Other, Some("42P01"), DbErrorKind::Permanent),
            (K::Other, Some("8"), DbErrorKind::Permanent),
            (K::Other, Some("1032"), DbErrorKind::Permanent),
            (K::Other, Some("3"), DbErrorKind::Permanent),
            (K::Other, None, DbErrorKind::Other),
        ];
        for (kind, code, expected) in cases {
            let what = format!("{kind:?} {code:?}");
            assert_eq!(db_kind(kind, code), expected, "{what}");
        }
    }
}
