//! The conformance suite on SQLite: each case on a fresh file.

use onceonly::Store;
use onceonly_conformance::StoreFactory;
use onceonly_sqlite::SqliteStore;

struct Sqlite;

impl StoreFactory for Sqlite {
    type S = SqliteStore;

    async fn fresh(&self) -> SqliteStore {
        // Kept for the test's life: the directory is leaked, not deleted, so
        // a failing case leaves its database to look at.
        let dir = tempfile::Builder::new().prefix("onceonly-test").tempdir().unwrap().keep();
        let url = format!("sqlite://{}", dir.join("ops.db").display());
        let store = SqliteStore::connect(&url).await.unwrap();
        store.migrate().await.unwrap();
        store
    }

    async fn second(&self, store: &SqliteStore) -> SqliteStore {
        store.reconnect().await.unwrap()
    }
}

onceonly_conformance::conformance_tests!(Sqlite);
