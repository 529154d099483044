//! What is particular to PostgreSQL: schemas, concurrent migration, error
//! mapping, SKIP LOCKED batches, the user's transaction. The protocol itself
//! is checked by `conformance.rs`.

use std::collections::HashSet;
use std::time::Duration;

use onceonly::store::{ClaimRow, OpClaim, OpClaimBatch, OpEnqueue, OpTakeOver};
use onceonly::{Error, Payload, State, Store};
use onceonly_postgres::{PgOptions, PgStore};
use sqlx::Row;

mod common;

use common::{new_schema, url};

async fn store_in(schema: &str) -> PgStore {
    let options = PgOptions::default().schema(schema).max_connections(4);
    PgStore::connect_with(&url(), options).await.unwrap()
}

fn claim<'a>(key: &'a str, payload: &'a Payload) -> OpClaim<'a> {
    OpClaim {
        job_type: "send",
        op_key: key,
        fingerprint: &payload.fingerprint,
        payload: payload.json.as_deref(),
        owner: "test",
        lease: Duration::from_secs(30),
    }
}

#[tokio::test]
async fn unreachable_database_names_the_url_without_its_password() {
    let started = std::time::Instant::now();
    let err = PgStore::connect("postgres://someone:hunter2@127.0.0.1:1/nowhere")
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::Unreachable { .. }), "{err:?}");
    assert!(!text.contains("hunter2") && text.contains("***"), "{text}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "a refused connection is reported at once"
    );
}

#[tokio::test]
async fn invalid_schema_is_refused_before_connecting() {
    for bad in ["", "Ops", "a;drop", "pg_catalog", "x\"y"] {
        let options = PgOptions::default().schema(bad);
        let err = PgStore::connect_with("postgres://127.0.0.1:1/x", options)
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Invalid(_)), "{bad:?}: {err:?}");
    }
}

#[tokio::test]
async fn migrate_is_idempotent_and_safe_when_run_at_once() {
    if !common::ready("migrate_is_idempotent_and_safe_when_run_at_once").await {
        return;
    }
    let schema = new_schema();
    let stores = stores_in(&schema, 4).await;
    let runs = stores.iter().map(|s| s.migrate());
    for result in futures::future::join_all(runs).await {
        result.unwrap();
    }
    stores[0].migrate().await.unwrap();
    let rows = sqlx::query(&format!(
        "SELECT version, name FROM \"{schema}\".migrations ORDER BY version"
    ))
    .fetch_all(stores[0].pool())
    .await
    .unwrap();
    let versions: Vec<i64> = rows.iter().map(|r| r.get("version")).collect();
    let expected: Vec<i64> = onceonly_postgres::MIGRATIONS
        .iter()
        .map(|m| m.version)
        .collect();
    assert_eq!(versions, expected, "each migration applied once");
}

async fn stores_in(schema: &str, n: usize) -> Vec<PgStore> {
    let mut stores = Vec::new();
    for _ in 0..n {
        stores.push(store_in(schema).await);
    }
    stores
}

#[tokio::test]
async fn schemas_do_not_see_each_other() {
    if !common::ready("schemas_do_not_see_each_other").await {
        return;
    }
    let a = store_in(&new_schema()).await;
    let b = store_in(&new_schema()).await;
    a.migrate().await.unwrap();
    b.migrate().await.unwrap();
    let payload = Payload::parse(r#"{"n": 1}"#).unwrap();
    assert!(matches!(
        a.op_claim(&claim("k", &payload)).await.unwrap(),
        ClaimRow::Claimed(_)
    ));
    assert!(b.op_get("send", "k").await.unwrap().is_none());
    assert!(matches!(
        b.op_claim(&claim("k", &payload)).await.unwrap(),
        ClaimRow::Claimed(_)
    ));
}

#[tokio::test]
async fn a_rolled_back_transaction_leaves_no_claim_and_the_search_path_alone() {
    if !common::ready("a_rolled_back_transaction_leaves_no_claim_and_the_search_path_alone").await {
        return;
    }
    let store = store_in(&new_schema()).await;
    store.migrate().await.unwrap();
    let payload = Payload::none();
    let mut tx = store.begin().await.unwrap();
    let before: String = sqlx::query_scalar("SHOW search_path")
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    assert!(matches!(
        store
            .op_claim_in(&mut tx, &claim("k", &payload))
            .await
            .unwrap(),
        ClaimRow::Claimed(_)
    ));
    let after: String = sqlx::query_scalar("SHOW search_path")
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    assert_eq!(before, after);
    assert!(store
        .op_get_in(&mut tx, "send", "k")
        .await
        .unwrap()
        .is_some());
    tx.rollback().await.unwrap();
    assert!(store.op_get("send", "k").await.unwrap().is_none());
}

#[tokio::test]
async fn a_stale_claim_taken_over_into_held_is_reported_won() {
    if !common::ready("a_stale_claim_taken_over_into_held_is_reported_won").await {
        return;
    }
    let store = store_in(&new_schema()).await;
    store.migrate().await.unwrap();
    let payload = Payload::none();
    let ClaimRow::Claimed(first) = store.op_claim(&claim("k", &payload)).await.unwrap() else {
        panic!("first claim")
    };
    let take = OpTakeOver {
        job_type: "send",
        op_key: "k",
        stale_token: first.token,
        to: State::Held,
        owner: "other",
        lease: Duration::from_secs(30),
        reason: "stale",
    };
    assert!(
        store.op_take_over(&take).await.unwrap().is_none(),
        "a live claim is never taken over"
    );
    store.clock_offset().advance(Duration::from_secs(31));
    let won = store
        .op_take_over(&take)
        .await
        .unwrap()
        .expect("the lease is over");
    assert_eq!(won.token, first.token + 1);
    let snap = store.op_get("send", "k").await.unwrap().unwrap();
    assert_eq!(snap.record.state, State::Held);
    assert_eq!(snap.record.lease_until, None);
    assert!(
        store.op_take_over(&take).await.unwrap().is_none(),
        "only once"
    );
}

#[tokio::test]
async fn concurrent_batches_never_share_a_row() {
    if !common::ready("concurrent_batches_never_share_a_row").await {
        return;
    }
    let store = store_in(&new_schema()).await;
    store.migrate().await.unwrap();
    let payload = Payload::none();
    for i in 0..60 {
        let key = format!("k{i}");
        let p = OpEnqueue {
            job_type: "send",
            op_key: &key,
            fingerprint: &payload.fingerprint,
            payload: None,
            delay: None,
        };
        store.op_enqueue(&p).await.unwrap();
    }
    let second = store.reconnect().await.unwrap();
    let batch = OpClaimBatch {
        job_type: "send",
        owner: "relay",
        lease: Duration::from_secs(30),
        limit: 7,
    };
    let mut seen = HashSet::new();
    loop {
        let (a, b) = tokio::join!(store.op_claim_batch(&batch), second.op_claim_batch(&batch));
        let (a, b) = (a.unwrap(), b.unwrap());
        if a.is_empty() && b.is_empty() {
            break;
        }
        for (record, claim) in a.into_iter().chain(b) {
            assert_eq!(record.state, State::Claimed);
            assert_eq!(claim.token, 1);
            assert!(
                seen.insert(record.op_key.clone()),
                "{} claimed twice",
                record.op_key
            );
        }
    }
    assert_eq!(seen.len(), 60);
}

/// A database's refusals keep their kind and cause: a constraint, a
/// statement timeout and a serialization failure are told apart (the
/// caller's next step depends on which), each with sqlx's error as source.
#[tokio::test]
async fn database_errors_keep_their_kind_and_cause() {
    use onceonly::DbErrorKind;
    use std::error::Error as _;

    if !common::ready("database_errors_keep_their_kind_and_cause").await {
        return;
    }
    let schema = new_schema();
    let store = store_in(&schema).await;
    store.migrate().await.unwrap();
    let map = onceonly_sqlx::map_err("postgres://test");
    let kind = |e: sqlx::Error| {
        let err = map(e);
        assert!(
            err.source().is_some(),
            "the driver's error is kept: {err:?}"
        );
        err.db_kind()
    };

    let mut conn = store.pool().acquire().await.unwrap();
    let insert = format!(
        "INSERT INTO {schema}.ops (job_type, op_key, state, token, attempts, fingerprint, created_at, updated_at) \
         VALUES ('j', 'k', 'queued', 0, 0, 'f', 0, 0)"
    );
    sqlx::query(&insert).execute(&mut *conn).await.unwrap();
    let twice = sqlx::query(&insert).execute(&mut *conn).await.unwrap_err();
    assert_eq!(kind(twice), Some(DbErrorKind::Constraint));

    sqlx::query("SET statement_timeout = 20")
        .execute(&mut *conn)
        .await
        .unwrap();
    let slow = sqlx::query("SELECT pg_sleep(2)")
        .execute(&mut *conn)
        .await
        .unwrap_err();
    assert_eq!(kind(slow), Some(DbErrorKind::Timeout));
    sqlx::query("SET statement_timeout = 0")
        .execute(&mut *conn)
        .await
        .unwrap();

    // Two serializable transactions that read each other's writes.
    let mut a = store.pool().begin().await.unwrap();
    let mut b = store.pool().begin().await.unwrap();
    for tx in [&mut a, &mut b] {
        sqlx::query("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE")
            .execute(&mut **tx)
            .await
            .unwrap();
        let n: i64 = sqlx::query_scalar(&format!("SELECT count(*) FROM {schema}.ops"))
            .fetch_one(&mut **tx)
            .await
            .unwrap();
        assert_eq!(n, 1);
    }
    let write = |key: &str| {
        format!(
            "INSERT INTO {schema}.ops (job_type, op_key, state, token, attempts, fingerprint, created_at, updated_at) \
             VALUES ('j', '{key}', 'queued', 0, 0, 'f', 0, 0)"
        )
    };
    sqlx::query(&write("a")).execute(&mut *a).await.unwrap();
    sqlx::query(&write("b")).execute(&mut *b).await.unwrap();
    a.commit().await.unwrap();
    let lost = b.commit().await.unwrap_err();
    assert_eq!(kind(lost), Some(DbErrorKind::Serialization));
}
