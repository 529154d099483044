//! The conformance suite on SQLite: each case on a fresh file.

use onceonly::{BoxError, Store};
use onceonly_conformance::StoreFactory;
use onceonly_sqlite::SqliteStore;
use sqlx::SqliteConnection;

struct Sqlite;

impl StoreFactory for Sqlite {
    type S = SqliteStore;

    async fn fresh(&self) -> SqliteStore {
        // Kept for the test's life: the directory is leaked, not deleted, so
        // a failing case leaves its database to look at.
        let dir = tempfile::Builder::new()
            .prefix("onceonly-test")
            .tempdir()
            .unwrap()
            .keep();
        let url = format!("sqlite://{}", dir.join("ops.db").display());
        let store = SqliteStore::connect(&url).await.unwrap();
        store.migrate().await.unwrap();
        store
    }

    async fn second(&self, store: &SqliteStore) -> SqliteStore {
        store.reconnect().await.unwrap()
    }

    async fn local_table(&self, store: &SqliteStore) {
        sqlx::query("CREATE TABLE IF NOT EXISTS conformance_local (op_key TEXT NOT NULL)")
            .execute(store.pool())
            .await
            .unwrap();
    }

    async fn local_insert(conn: &mut SqliteConnection, op_key: &str) -> Result<(), BoxError> {
        sqlx::query("INSERT INTO conformance_local (op_key) VALUES (?1)")
            .bind(op_key)
            .execute(conn)
            .await?;
        Ok(())
    }

    async fn local_count(&self, store: &SqliteStore, op_key: &str) -> i64 {
        sqlx::query_scalar("SELECT COUNT(*) FROM conformance_local WHERE op_key = ?1")
            .bind(op_key)
            .fetch_one(store.pool())
            .await
            .unwrap()
    }
}

onceonly_conformance::conformance_tests!(Sqlite);
