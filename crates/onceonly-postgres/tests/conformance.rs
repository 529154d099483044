//! The conformance suite on PostgreSQL: each case in a fresh schema
//! `t_<time>_<random>` of the database named by `ONCEONLY_TEST_PG` (default
//! `postgres://postgres@127.0.0.1:5432/test`).
//!
//! The user table of local effects lives in the same schema. Its insert gets
//! only the transaction's connection, so the test connections carry
//! `search_path=<schema>` in their URL, as an application's own connections
//! would; the store itself names its schema in every statement.

mod common;

use onceonly::{BoxError, Store};
use onceonly_conformance::StoreFactory;
use onceonly_postgres::{PgOptions, PgStore};
use sqlx::PgConnection;

struct Pg;

impl StoreFactory for Pg {
    type S = PgStore;

    async fn fresh(&self) -> PgStore {
        // Left in place after the test, like the SQLite suite's files, so a
        // failing case leaves its records to look at (a later run drops it).
        // A small pool: the cases run in parallel against one server.
        let schema = common::new_schema();
        let base = common::url();
        let sep = if base.contains('?') { '&' } else { '?' };
        let url = format!("{base}{sep}options[search_path]={schema}");
        let options = PgOptions::default().schema(schema).max_connections(4);
        let store = PgStore::connect_with(&url, options).await.unwrap();
        store.migrate().await.unwrap();
        store
    }

    async fn second(&self, store: &PgStore) -> PgStore {
        store.reconnect().await.unwrap()
    }

    async fn local_table(&self, store: &PgStore) {
        let sql = format!(
            "CREATE TABLE IF NOT EXISTS \"{}\".conformance_local (op_key TEXT NOT NULL)",
            store.schema()
        );
        sqlx::query(&sql).execute(store.pool()).await.unwrap();
    }

    async fn local_insert(conn: &mut PgConnection, op_key: &str) -> Result<(), BoxError> {
        sqlx::query("INSERT INTO conformance_local (op_key) VALUES ($1)")
            .bind(op_key)
            .execute(conn)
            .await?;
        Ok(())
    }

    async fn local_count(&self, store: &PgStore, op_key: &str) -> i64 {
        let sql = format!(
            "SELECT COUNT(*) FROM \"{}\".conformance_local WHERE op_key = $1",
            store.schema()
        );
        sqlx::query_scalar(&sql)
            .bind(op_key)
            .fetch_one(store.pool())
            .await
            .unwrap()
    }

    async fn unavailable(&self) -> Option<String> {
        common::unavailable().await
    }
}

onceonly_conformance::conformance_tests!(Pg);
