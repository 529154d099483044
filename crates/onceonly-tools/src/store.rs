//! Opening the store a database URL names ([`DbKind::of`] decides which),
//! and running code generic over the store on it: what the CLI's commands
//! and the console's binary share.
//!
//! ```no_run
//! # async fn demo() -> onceonly::Result<()> {
//! use onceonly::Store;
//! use onceonly_tools::{store::open_migrated, with_store};
//!
//! let store = open_migrated("sqlite://onceonly.db").await?;
//! let tables = with_store!(&store, s => s.has_tables().await)?;
//! assert!(tables);
//! # Ok(()) }
//! ```

use onceonly::db_url::{redact, DbKind};
use onceonly::{Error, Store};
use onceonly_mysql::MySqlStore;
use onceonly_postgres::PgStore;
use onceonly_sqlite::SqliteStore;

/// The store a database URL names.
pub enum AnyStore {
    /// `sqlite://...`
    Sqlite(SqliteStore),
    /// `postgres://...` or `postgresql://...`
    Postgres(PgStore),
    /// `mysql://...` or `mariadb://...`
    MySql(MySqlStore),
}

/// Runs `$body` with `$s` bound to the concrete store inside `$any` (an
/// [`AnyStore`], or a reference to one).
#[macro_export]
macro_rules! with_store {
    ($any:expr, $s:ident => $body:expr) => {
        match $any {
            $crate::store::AnyStore::Sqlite($s) => $body,
            $crate::store::AnyStore::Postgres($s) => $body,
            $crate::store::AnyStore::MySql($s) => $body,
        }
    };
}

/// Opens the database at `url`, creating a SQLite file if missing (not
/// migrating it).
pub async fn open(url: &str) -> onceonly::Result<AnyStore> {
    Ok(match DbKind::of(url)? {
        DbKind::Sqlite => AnyStore::Sqlite(SqliteStore::connect(url).await?),
        DbKind::Postgres => AnyStore::Postgres(PgStore::connect(url).await?),
        DbKind::MySql => AnyStore::MySql(MySqlStore::connect(url).await?),
    })
}

/// Opens the database at `url` and migrates it.
pub async fn open_migrated(url: &str) -> onceonly::Result<AnyStore> {
    let store = open(url).await?;
    with_store!(&store, s => s.migrate().await)?;
    Ok(store)
}

/// Opens the database at `url` for a command that only reads: it creates
/// neither a file nor a table, and says so when there is nothing to read.
pub async fn open_existing(url: &str) -> onceonly::Result<AnyStore> {
    let store = match DbKind::of(url)? {
        DbKind::Sqlite => AnyStore::Sqlite(SqliteStore::connect_existing(url).await?),
        DbKind::Postgres => AnyStore::Postgres(PgStore::connect(url).await?),
        DbKind::MySql => AnyStore::MySql(MySqlStore::connect(url).await?),
    };
    if !with_store!(&store, s => s.has_tables().await)? {
        return Err(Error::Invalid(format!(
            "{} has no onceonly tables yet: nothing to read (`onceonly --db URL migrate` creates them)",
            redact(url)
        )));
    }
    Ok(store)
}
