//! Running a [`Query`] with sqlx, on the user's connection or transaction:
//! local effects and the outbox (`*_in` calls), and the migrations.
//! Everything else runs on the store's own connection ([`crate::direct`]).

use onceonly::store::Claim;
use onceonly::Snapshot;
use onceonly_sqlx::{claim_from_row, snapshot_from_row, Migration};
use rusqlite::types::Value;
use sqlx::sqlite::SqliteArguments;
use sqlx::{Executor, Sqlite, SqliteConnection};

use crate::queries::Query;

type Res<T> = Result<T, sqlx::Error>;

/// The query with its arguments bound in order.
fn bound(q: &Query) -> sqlx::query::Query<'_, Sqlite, SqliteArguments<'_>> {
    q.args
        .iter()
        .fold(sqlx::query(q.sql), |query, arg| match arg {
            Value::Null => query.bind(None::<i64>),
            Value::Integer(i) => query.bind(*i),
            Value::Real(f) => query.bind(*f),
            Value::Text(s) => query.bind(s.as_str()),
            Value::Blob(b) => query.bind(b.as_slice()),
        })
}

/// Runs a statement that returns no rows; the affected-row count.
pub(crate) async fn execute(conn: &mut SqliteConnection, q: &Query) -> Res<u64> {
    Ok(bound(q).execute(conn).await?.rows_affected())
}

pub(crate) async fn claim(conn: &mut SqliteConnection, q: &Query) -> Res<Option<Claim>> {
    let row = bound(q).fetch_optional(conn).await?;
    row.as_ref().map(claim_from_row).transpose()
}

pub(crate) async fn snapshot(conn: &mut SqliteConnection, q: &Query) -> Res<Option<Snapshot>> {
    let row = bound(q).fetch_optional(conn).await?;
    row.as_ref().map(snapshot_from_row).transpose()
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
