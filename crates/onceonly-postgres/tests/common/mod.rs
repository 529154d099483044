//! What the test files share: the test database and fresh schemas on it.

#![allow(dead_code)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sqlx::{Connection, PgConnection};

/// Test schemas are dropped by a later run once they are this old; until
/// then a failing case leaves its records to look at.
const KEEP_SCHEMAS: Duration = Duration::from_secs(3600);

/// The test database: env `ONCEONLY_TEST_PG`, or the local default.
pub fn url() -> String {
    onceonly_sqlx::test_db::pg_url()
}

/// A new schema name, `t_<creation time>_<random>` in hex.
pub fn new_schema() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    format!("t_{secs:08x}_{:08x}", rand::random::<u32>())
}

/// Whether `test` runs: `false` (skip, loudly) when the test database is
/// unreachable and `ONCEONLY_SKIP_PG=1` outside CI; an unreachable
/// database fails the test otherwise ([`onceonly_sqlx::test_db::TestDb::ready`]).
pub async fn ready(test: &str) -> bool {
    onceonly_sqlx::test_db::PG.ready(test, unavailable().await)
}

/// Why the test database cannot be reached, if it cannot. The first call in
/// a test binary also drops the test schemas older than [`KEEP_SCHEMAS`].
pub async fn unavailable() -> Option<String> {
    let url = url();
    let tried = tokio::time::timeout(Duration::from_secs(3), PgConnection::connect(&url));
    let why = match tried.await {
        Ok(Ok(mut conn)) => {
            sweep_old_schemas(&mut conn).await;
            let _ = conn.close().await;
            return None;
        }
        Ok(Err(e)) => e.to_string(),
        Err(_) => "no answer within 3s".to_owned(),
    };
    Some(format!("{}: {why}", onceonly::db_url::redact(&url)))
}

async fn sweep_old_schemas(conn: &mut PgConnection) {
    static SWEPT: AtomicBool = AtomicBool::new(false);
    if SWEPT.swap(true, Ordering::SeqCst) {
        return;
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let names: Vec<String> = sqlx::query_scalar(
        "SELECT nspname::text FROM pg_namespace WHERE nspname ~ '^t_[0-9a-f]{8}_[0-9a-f]{8}$'",
    )
    .fetch_all(&mut *conn)
    .await
    .unwrap_or_default();
    for name in names {
        let made = u64::from_str_radix(&name[2..10], 16).unwrap_or(u64::MAX);
        if made.saturating_add(KEEP_SCHEMAS.as_secs()) < now {
            // Another test binary may be dropping it too: errors do not matter.
            let _ = sqlx::query(&format!("DROP SCHEMA IF EXISTS \"{name}\" CASCADE"))
                .execute(&mut *conn)
                .await;
        }
    }
}
