//! MySQL's error numbers, read where a decision depends on them: a duplicate
//! key ends the first half of a claim, deadlocks and lock waits are retried,
//! a value too long for its column is the caller's bad input.

use onceonly::{DbError, DbErrorKind, Error};
use sqlx::mysql::MySqlDatabaseError;

/// ER_DUP_ENTRY: the insert met an existing key.
const DUP_ENTRY: u16 = 1062;
/// ER_LOCK_WAIT_TIMEOUT (also NOWAIT on MariaDB).
pub(crate) const LOCK_WAIT_TIMEOUT: u16 = 1205;
/// ER_LOCK_DEADLOCK: the server rolled the whole transaction back.
pub(crate) const DEADLOCK: u16 = 1213;
/// ER_LOCK_NOWAIT on MySQL 8.
const LOCK_NOWAIT: u16 = 3572;
/// ER_DATA_TOO_LONG: refused by strict mode instead of cut.
const DATA_TOO_LONG: u16 = 1406;
/// Refusals at connect: access denied, unknown database, too many connections.
const CONNECT_REFUSALS: [u16; 4] = [1044, 1045, 1049, 1040];

/// The MySQL error number of `e`, when the server refused a statement.
pub(crate) fn number(e: &sqlx::Error) -> Option<u16> {
    match e {
        sqlx::Error::Database(db) => db
            .try_downcast_ref::<MySqlDatabaseError>()
            .map(|m| m.number()),
        _ => None,
    }
}

/// The statement met an existing primary key.
pub(crate) fn is_duplicate(e: &sqlx::Error) -> bool {
    number(e) == Some(DUP_ENTRY)
}

/// A deadlock or a lock wait timeout: running the work again may succeed.
pub(crate) fn is_transient(e: &sqlx::Error) -> bool {
    matches!(number(e), Some(DEADLOCK | LOCK_WAIT_TIMEOUT))
}

/// Maps a driver error to onceonly's: the shared mapping, with MySQL's
/// numbers for what it cannot tell from SQLSTATE (lock waits, too-long
/// values, refusals at connect).
pub fn map_err(url: &str) -> impl Fn(sqlx::Error) -> Error + '_ {
    move |e| match number(&e) {
        Some(DATA_TOO_LONG) => Error::Invalid(format!(
            "refused by MySQL, nothing written: {} (the value is longer than its column)",
            db_message(&e)
        )),
        Some(DEADLOCK) => Error::Db(DbError::new(DbErrorKind::Serialization, db_message(&e), e)),
        Some(LOCK_WAIT_TIMEOUT | LOCK_NOWAIT) => {
            Error::Db(DbError::new(DbErrorKind::Timeout, db_message(&e), e))
        }
        Some(n) if CONNECT_REFUSALS.contains(&n) => Error::Unreachable {
            url: onceonly::db_url::redact(url),
            reason: db_message(&e),
        },
        _ => onceonly_sqlx::map_err(url)(e),
    }
}

fn db_message(e: &sqlx::Error) -> String {
    match e {
        sqlx::Error::Database(db) => db.to_string(),
        other => other.to_string(),
    }
}
