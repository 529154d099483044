//! What the test files share: the test server and a fresh database on it
//! per case (MySQL's schemas are databases).

#![allow(dead_code)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use onceonly::Store;
use onceonly_mysql::{MySqlOptions, MySqlStore};
use sqlx::{Connection, MySqlConnection};

/// Test databases are dropped by a later run once they are this old; until
/// then a failing case leaves its records to look at.
const KEEP_DATABASES: Duration = Duration::from_secs(3600);

/// The test server's URL: env `ONCEONLY_TEST_MYSQL`, or the local default.
pub fn url() -> String {
    onceonly_sqlx::test_db::mysql_url()
}

/// `base` with its database replaced by `database` (query string kept).
pub fn with_database(base: &str, database: &str) -> String {
    let (head, query) = match base.split_once('?') {
        Some((h, q)) => (h, Some(q)),
        None => (base, None),
    };
    let authority_at = head.find("://").map_or(0, |i| i + 3);
    let host_end = head[authority_at..]
        .find('/')
        .map_or(head.len(), |i| authority_at + i);
    let mut out = format!("{}/{database}", &head[..host_end]);
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    out
}

/// A new database name, `t_<creation time>_<random>` in hex.
pub fn new_database() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    format!("t_{secs:08x}_{:08x}", rand::random::<u32>())
}

/// A new, empty database on the test server; returns its URL.
pub async fn fresh_database() -> String {
    let name = new_database();
    let mut admin = MySqlConnection::connect(&url()).await.unwrap();
    sqlx::query(&format!("CREATE DATABASE `{name}`"))
        .execute(&mut admin)
        .await
        .unwrap();
    let _ = admin.close().await;
    with_database(&url(), &name)
}

/// A migrated store on a fresh database, with a small pool (the cases run
/// in parallel against one server).
pub async fn fresh_store() -> MySqlStore {
    let url = fresh_database().await;
    let store = MySqlStore::connect_with(&url, MySqlOptions::default().max_connections(4))
        .await
        .unwrap();
    store.migrate().await.unwrap();
    store
}

/// Why the test server cannot be reached, if it cannot. The first call in a
/// test binary also drops the test databases older than [`KEEP_DATABASES`].
pub async fn unavailable() -> Option<String> {
    let url = url();
    let tried = tokio::time::timeout(Duration::from_secs(3), MySqlConnection::connect(&url));
    let why = match tried.await {
        Ok(Ok(mut conn)) => {
            sweep_old_databases(&mut conn).await;
            let _ = conn.close().await;
            return None;
        }
        Ok(Err(e)) => e.to_string(),
        Err(_) => "no answer within 3s".to_owned(),
    };
    Some(format!("{}: {why}", onceonly::db_url::redact(&url)))
}

/// Whether `test` can run: `false` when it is to be skipped
/// (see [`onceonly_sqlx::test_db::TestDb::ready`]).
pub async fn reachable(test: &str) -> bool {
    onceonly_sqlx::test_db::MYSQL.ready(test, unavailable().await)
}

async fn sweep_old_databases(conn: &mut MySqlConnection) {
    static SWEPT: AtomicBool = AtomicBool::new(false);
    if SWEPT.swap(true, Ordering::SeqCst) {
        return;
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let names: Vec<String> = sqlx::query_scalar(
        "SELECT CAST(schema_name AS CHAR) FROM information_schema.schemata \
         WHERE schema_name REGEXP '^t_[0-9a-f]{8}_[0-9a-f]{8}$'",
    )
    .fetch_all(&mut *conn)
    .await
    .unwrap_or_default();
    for name in names {
        let made = u64::from_str_radix(&name[2..10], 16).unwrap_or(u64::MAX);
        if made.saturating_add(KEEP_DATABASES.as_secs()) < now {
            // Another test binary may be dropping it too: errors do not matter.
            let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS `{name}`"))
                .execute(&mut *conn)
                .await;
        }
    }
}

/// The database a store's pool is on.
pub async fn database_of(store: &MySqlStore) -> String {
    sqlx::query_scalar("SELECT CAST(DATABASE() AS CHAR)")
        .fetch_one(store.pool())
        .await
        .unwrap()
}
