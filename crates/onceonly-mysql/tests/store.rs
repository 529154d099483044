//! What the MySQL store does that the conformance suite cannot ask of every
//! store: strict mode, the migration, deadlock retry, URLs it refuses.

mod common;

use std::time::Duration;

use onceonly::store::{ClaimRow, Completion, OpClaim, OpCompleteBatch, OpEnqueue, OpList, OpMove};
use onceonly::{Error, State, Store};
use onceonly_mysql::{MySqlOptions, MySqlStore};
use sqlx::{Connection, Executor, MySqlConnection};

fn claim<'a>(job_type: &'a str, op_key: &'a str) -> OpClaim<'a> {
    OpClaim {
        job_type,
        op_key,
        fingerprint: "f",
        payload: None,
        owner: "w1",
        lease: Duration::from_secs(30),
    }
}

/// A key or job type longer than its column is refused with an error that
/// names the column, and nothing is written: strict mode, never a cut key
/// (a cut key would be another operation's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_longer_than_its_column_is_refused_not_cut() {
    if !common::reachable("a_value_longer_than_its_column_is_refused_not_cut").await {
        return;
    }
    let store = common::fresh_store().await;
    let long_key = "k".repeat(513);
    let long_job = "j".repeat(129);
    for (job_type, op_key, column) in [
        ("send", long_key.as_str(), "op_key"),
        (long_job.as_str(), "k", "job_type"),
    ] {
        let err = store.op_claim(&claim(job_type, op_key)).await.unwrap_err();
        let Error::Invalid(msg) = &err else {
            panic!("claim of a too-long {column}: {err:?}");
        };
        assert!(msg.contains(column) && msg.contains("too long"), "{msg}");
        let enqueue = OpEnqueue {
            job_type,
            op_key,
            fingerprint: "f",
            payload: None,
            delay: None,
        };
        let err = store.op_enqueue(&enqueue).await.unwrap_err();
        assert!(matches!(err, Error::Invalid(_)), "enqueue: {err:?}");
    }
    let written = store.op_list(&OpList::default()).await.unwrap();
    assert!(written.is_empty(), "nothing written: {written:?}");
    // The longest key the column holds is kept whole.
    let longest = "k".repeat(512);
    let ClaimRow::Claimed(_) = store.op_claim(&claim("send", &longest)).await.unwrap() else {
        panic!("the longest key was not claimed");
    };
    let got = store.op_get("send", &longest).await.unwrap().unwrap();
    assert_eq!(got.record.op_key, longest);
}

/// Every pooled connection (the user's transactions run on them too) is in
/// STRICT_ALL_TABLES, whatever the server's default.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_pooled_connection_is_in_strict_mode() {
    if !common::reachable("every_pooled_connection_is_in_strict_mode").await {
        return;
    }
    let store = common::fresh_store().await;
    let mut held = Vec::new();
    for _ in 0..4 {
        let mut conn = store.pool().acquire().await.unwrap();
        let mode: String = sqlx::query_scalar("SELECT CAST(@@SESSION.sql_mode AS CHAR)")
            .fetch_one(&mut *conn)
            .await
            .unwrap();
        assert!(mode.split(',').any(|m| m == "STRICT_ALL_TABLES"), "{mode}");
        held.push(conn);
    }
}

/// Two processes migrating one database at once apply each migration once,
/// and a third run changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_migrations_apply_each_once() {
    if !common::reachable("concurrent_migrations_apply_each_once").await {
        return;
    }
    let url = common::fresh_database().await;
    let a = MySqlStore::connect(&url).await.unwrap();
    let b = MySqlStore::connect(&url).await.unwrap();
    let (ra, rb) = tokio::join!(a.migrate(), b.migrate());
    ra.unwrap();
    rb.unwrap();
    a.migrate().await.unwrap();
    let versions: Vec<i64> =
        sqlx::query_scalar("SELECT version FROM onceonly_migrations ORDER BY version")
            .fetch_all(a.pool())
            .await
            .unwrap();
    let expected: Vec<i64> = onceonly_mysql::MIGRATIONS
        .iter()
        .map(|m| m.version)
        .collect();
    assert_eq!(versions, expected);
    assert!(a.has_tables().await.unwrap());
}

/// A batch completion that the server picks as a deadlock's victim (1213)
/// runs again and completes every claim; the other transaction's writes
/// stand.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadlocked_batch_completion_is_run_again() {
    if !common::reachable("a_deadlocked_batch_completion_is_run_again").await {
        return;
    }
    let store = common::fresh_store().await;
    let mut tokens = Vec::new();
    for key in ["a", "b"] {
        let ClaimRow::Claimed(c) = store.op_claim(&claim("send", key)).await.unwrap() else {
            panic!("{key} not claimed");
        };
        tokens.push(c.token);
    }
    // The other transaction writes many rows first, so InnoDB (which rolls
    // back the smaller transaction) picks the store's as the victim.
    let url = common::with_database(&common::url(), &common::database_of(&store).await);
    let mut other = MySqlConnection::connect(&url).await.unwrap();
    other
        .execute("CREATE TABLE heavy (n INT NOT NULL) ENGINE = InnoDB")
        .await
        .unwrap();
    other.execute("BEGIN").await.unwrap();
    other
        .execute("INSERT INTO heavy (n) SELECT seq FROM seq_1_to_500")
        .await
        .unwrap();
    let lock = "SELECT token FROM onceonly_ops WHERE job_type = 'send' AND op_key = ? FOR UPDATE";
    sqlx::query(lock)
        .bind("b")
        .execute(&mut other)
        .await
        .unwrap();

    let items = [
        Completion {
            op_key: "a",
            token: tokens[0],
            external_ref: None,
            result: "{}",
        },
        Completion {
            op_key: "b",
            token: tokens[1],
            external_ref: None,
            result: "{}",
        },
    ];
    let batch = {
        let store = store.clone();
        tokio::spawn(async move {
            let p = OpCompleteBatch {
                job_type: "send",
                items: &items,
            };
            store.op_complete_batch(&p).await
        })
    };
    // The batch has completed `a` and waits for `b`; taking `a` now closes
    // the cycle.
    tokio::time::sleep(Duration::from_millis(500)).await;
    sqlx::query(lock)
        .bind("a")
        .execute(&mut other)
        .await
        .unwrap();
    other.execute("COMMIT").await.unwrap();

    let completed = batch.await.unwrap().unwrap();
    assert_eq!(completed, ["a", "b"]);
    assert!(store.lock_retries() >= 1, "the batch was not run again");
    let heavy: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM heavy")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(heavy, 500, "the other transaction committed");
}

/// A URL that names no database, or no MySQL at all, is refused by name.
#[tokio::test]
async fn urls_without_a_database_are_refused() {
    let err = MySqlStore::connect_with(
        "mysql://root:hunter2@127.0.0.1:3306",
        MySqlOptions::default(),
    )
    .await
    .unwrap_err();
    let Error::Invalid(msg) = &err else {
        panic!("{err:?}");
    };
    assert!(msg.contains("names no database"), "{msg}");
    assert!(!msg.contains("hunter2"), "password printed: {msg}");
}

/// An unreachable server is reported as such, with the URL.
#[tokio::test]
async fn an_unreachable_server_is_named() {
    let err = MySqlStore::connect("mysql://root:hunter2@127.0.0.1:1/x")
        .await
        .unwrap_err();
    let Error::Unreachable { url, .. } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(url, "mysql://root:***@127.0.0.1:1/x");
}

/// Two claims of one queued key at once, each in its own transaction (two
/// deliveries of a local job recorded at push): one claims, the other waits
/// on the row's lock and finds it completed. Inserting first would leave
/// each the duplicate key's shared lock, and both updates deadlock (1213).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_claims_of_one_queued_key_in_transactions_at_once_do_not_deadlock() {
    if !common::reachable("two_claims_of_one_queued_key_in_transactions_at_once_do_not_deadlock")
        .await
    {
        return;
    }
    let store = common::fresh_store().await;
    for i in 0..10 {
        let key = format!("k{i}");
        let enqueue = OpEnqueue {
            job_type: "send",
            op_key: &key,
            fingerprint: "f",
            payload: None,
            delay: None,
        };
        store.op_enqueue(&enqueue).await.unwrap();
        let run = |store: MySqlStore, key: String| async move {
            let mut tx = store.begin().await?;
            let row = store.op_claim_in(&mut tx, &claim("send", &key)).await?;
            let ours = matches!(row, ClaimRow::Claimed(_));
            if let ClaimRow::Claimed(c) = row {
                tokio::time::sleep(Duration::from_millis(50)).await;
                let done = OpMove::new("send", &key, c.token, State::Claimed, State::Completed);
                assert!(store.op_move_in(&mut tx, &done).await?);
            }
            MySqlStore::commit(tx).await?;
            Ok::<bool, Error>(ours)
        };
        let (a, b) = tokio::join!(
            tokio::spawn(run(store.clone(), key.clone())),
            tokio::spawn(run(store.clone(), key.clone()))
        );
        let (a, b) = (a.unwrap(), b.unwrap());
        let claimed = [a, b].map(|r| r.unwrap_or_else(|e| panic!("{key}: {e}")));
        assert_eq!(
            claimed.iter().filter(|&&c| c).count(),
            1,
            "{key}: {claimed:?}"
        );
        let r = store.op_get("send", &key).await.unwrap().unwrap().record;
        assert_eq!((r.state, r.token), (State::Completed, 1), "{key}");
    }
}
