//! Opening the database a URL names, and running a command generic over
//! the store on it.

use onceonly::{Error, Store};
use onceonly_postgres::PgStore;
use onceonly_sqlite::SqliteStore;

/// The store a `--db` URL names.
pub enum AnyStore {
    /// `sqlite://...`
    Sqlite(SqliteStore),
    /// `postgres://...` or `postgresql://...`
    Postgres(PgStore),
}

/// Opens the database at `url` (not migrating it).
pub async fn open(url: &str) -> onceonly::Result<AnyStore> {
    if url.starts_with("sqlite:") {
        Ok(AnyStore::Sqlite(SqliteStore::connect(url).await?))
    } else {
        open_server(url).await
    }
}

/// A PostgreSQL URL opened, or the URL refused with what is expected.
async fn open_server(url: &str) -> onceonly::Result<AnyStore> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(AnyStore::Postgres(PgStore::connect(url).await?))
    } else {
        Err(Error::Invalid(format!(
            "--db {:?}: expected sqlite://PATH, sqlite:///ABS/PATH or postgres://...",
            onceonly::db_url::redact(url)
        )))
    }
}

/// Runs `$body` with `$s` bound to the concrete store inside `$any`.
macro_rules! with_store {
    ($any:expr, $s:ident => $body:expr) => {
        match $any {
            $crate::store::AnyStore::Sqlite($s) => $body,
            $crate::store::AnyStore::Postgres($s) => $body,
        }
    };
}
pub(crate) use with_store;

/// Opens the database at `url` and migrates it.
pub async fn open_migrated(url: &str) -> onceonly::Result<AnyStore> {
    let store = open(url).await?;
    with_store!(&store, s => s.migrate().await)?;
    Ok(store)
}

/// Opens the database at `url` for a command that only reads: it creates
/// neither a file nor a table, and says so when there is nothing to read.
pub async fn open_existing(url: &str) -> onceonly::Result<AnyStore> {
    let store = if url.starts_with("sqlite:") {
        AnyStore::Sqlite(SqliteStore::connect_existing(url).await?)
    } else {
        open_server(url).await?
    };
    if !with_store!(&store, s => s.has_tables().await)? {
        return Err(Error::Invalid(format!(
            "{} has no onceonly tables yet: nothing to read (`onceonly --db URL migrate` creates them)",
            onceonly::db_url::redact(url)
        )));
    }
    Ok(store)
}
