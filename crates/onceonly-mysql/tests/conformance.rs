//! The conformance suite on MySQL/MariaDB: each case in a fresh database
//! `t_<time>_<random>` on the server named by `ONCEONLY_TEST_MYSQL` (default
//! `mysql://root@127.0.0.1:3306/test`). The user table of local effects
//! lives in the same database, which the store's connections use.

mod common;

use onceonly::BoxError;
use onceonly_conformance::StoreFactory;
use onceonly_mysql::MySqlStore;
use onceonly_sqlx::test_db::{TestDb, MYSQL};
use sqlx::MySqlConnection;

struct MySql;

impl StoreFactory for MySql {
    type S = MySqlStore;

    async fn fresh(&self) -> MySqlStore {
        common::fresh_store().await
    }

    async fn second(&self, store: &MySqlStore) -> MySqlStore {
        store.reconnect().await.unwrap()
    }

    async fn local_table(&self, store: &MySqlStore) {
        sqlx::query(
            "CREATE TABLE IF NOT EXISTS conformance_local (op_key VARCHAR(600) NOT NULL) \
             ENGINE = InnoDB",
        )
        .execute(store.pool())
        .await
        .unwrap();
    }

    async fn local_insert(conn: &mut MySqlConnection, op_key: &str) -> Result<(), BoxError> {
        sqlx::query("INSERT INTO conformance_local (op_key) VALUES (?)")
            .bind(op_key)
            .execute(conn)
            .await?;
        Ok(())
    }

    async fn local_count(&self, store: &MySqlStore, op_key: &str) -> i64 {
        sqlx::query_scalar("SELECT COUNT(*) FROM conformance_local WHERE op_key = BINARY ?")
            .bind(op_key)
            .fetch_one(store.pool())
            .await
            .unwrap()
    }

    async fn unavailable(&self) -> Option<String> {
        common::unavailable().await
    }

    fn server(&self) -> &'static TestDb {
        &MYSQL
    }
}

onceonly_conformance::conformance_tests!(MySql);
