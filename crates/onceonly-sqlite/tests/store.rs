//! SQLite-specific behaviour: the file's settings and concurrency with
//! other processes' connections.

use onceonly::Store;
use onceonly_sqlite::SqliteStore;

async fn fresh() -> SqliteStore {
    let dir = tempfile::Builder::new()
        .prefix("onceonly-sqlite")
        .tempdir()
        .unwrap()
        .keep();
    let store = SqliteStore::connect(&format!("sqlite://{}", dir.join("s.db").display()))
        .await
        .unwrap();
    store.migrate().await.unwrap();
    store
}

#[tokio::test]
async fn the_file_is_in_wal_mode_with_normal_sync() {
    let store = fresh().await;
    let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(store.pool())
        .await
        .unwrap();
    let sync: i64 = sqlx::query_scalar("PRAGMA synchronous")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(mode, "wal");
    assert_eq!(
        sync, 1,
        "synchronous=NORMAL (1): a process crash loses nothing committed"
    );
    // The store's own connection is set apart from the pool's.
    assert_eq!(store.pragma("journal_mode").await.unwrap(), "wal");
    assert_eq!(store.pragma("synchronous").await.unwrap(), "1");
}

#[tokio::test]
async fn an_in_memory_url_is_refused_by_name() {
    let err = SqliteStore::connect("sqlite::memory:").await.unwrap_err();
    assert!(
        err.to_string().contains("in-memory"),
        "the error says why: {err}"
    );
}

#[tokio::test]
async fn migrate_twice_changes_nothing() {
    let store = fresh().await;
    store.migrate().await.unwrap();
    let applied: i64 = sqlx::query_scalar("SELECT count(*) FROM onceonly_migrations")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(applied, onceonly_sqlite::MIGRATIONS.len() as i64);
}
