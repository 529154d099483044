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
async fn the_file_is_in_wal_mode_with_normal_sync_and_a_bounded_page_cache() {
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
    // A bounded page cache: peak memory must not grow with the history
    // (64 MiB allowed made a 200k-operation run peak at 3.5x a 20k one).
    assert_eq!(store.pragma("cache_size").await.unwrap(), "-4096");
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

#[tokio::test]
async fn migrating_a_version_2_file_keeps_every_record() {
    use sqlx::{Connection, Executor};
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("v2.db").display());
    // The file as version 2 left it, with one finished record.
    let mut conn = sqlx::SqliteConnection::connect(&format!("{url}?mode=rwc"))
        .await
        .unwrap();
    conn.execute(
        "CREATE TABLE onceonly_migrations (
             version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)",
    )
    .await
    .unwrap();
    for m in &onceonly_sqlite::MIGRATIONS[..2] {
        conn.execute(m.sql).await.unwrap();
        sqlx::query("INSERT INTO onceonly_migrations VALUES (?1, ?2, 'then')")
            .bind(m.version)
            .bind(m.name)
            .execute(&mut conn)
            .await
            .unwrap();
    }
    conn.execute(
        "INSERT INTO onceonly_ops (job_type, op_key, state, token, attempts, fingerprint,
                                   result, created_at, updated_at, completed_at)
         VALUES ('mail', 'order-7', 'completed', 3, 2, 'fp', '{\"sent\":true}', 1, 2, 2)",
    )
    .await
    .unwrap();
    conn.close().await.unwrap();

    let store = SqliteStore::connect(&url).await.unwrap();
    store.migrate().await.unwrap();
    let snap = store.op_get("mail", "order-7").await.unwrap().unwrap();
    assert_eq!(snap.record.state, onceonly::State::Completed);
    assert_eq!((snap.record.token, snap.record.attempts), (3, 2));
    assert_eq!(snap.record.result.as_deref(), Some("{\"sent\":true}"));
    let table: String =
        sqlx::query_scalar("SELECT sql FROM sqlite_master WHERE name = 'onceonly_ops'")
            .fetch_one(store.pool())
            .await
            .unwrap();
    assert!(table.contains("WITHOUT ROWID"), "{table}");
    assert!(!table.contains(" IN ("), "migration 0004 ran: {table}");
}

/// One worker process mixing local effects (the user's sqlx transaction on
/// the pool) with keyed ones (the store's own connection): both want the
/// file's write lock, and each must wait for the other, not fail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_and_keyed_jobs_share_the_file_without_busy_errors() {
    use onceonly::{
        EffectCtx, EffectFn, EffectKind, EffectOutcome, Guard, JobSpec, Outcome, Payload,
    };
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    let store = fresh().await;
    sqlx::query("CREATE TABLE receipts (op_key TEXT NOT NULL)")
        .execute(store.pool())
        .await
        .unwrap();
    let local =
        Arc::new(Guard::new(store.clone(), JobSpec::new("receipt", EffectKind::Local)).unwrap());
    let keyed =
        Arc::new(Guard::new(store.clone(), JobSpec::new("webhook", EffectKind::Keyed)).unwrap());
    let sent = Arc::new(AtomicUsize::new(0));
    let mut jobs = Vec::new();
    for i in 0..60 {
        let (local, keyed, sent) = (local.clone(), keyed.clone(), sent.clone());
        jobs.push(tokio::spawn(async move {
            let key = format!("order-{i}");
            let payload = Payload::none();
            let outcome = if i % 2 == 0 {
                local
                    .run_local(&key, &payload, |conn, ctx: &EffectCtx| {
                        Box::pin(async move {
                            sqlx::query("INSERT INTO receipts (op_key) VALUES (?1)")
                                .bind(&ctx.op_key)
                                .execute(&mut *conn)
                                .await?;
                            // Holding the write lock a while, as a real
                            // local effect does: keyed calls must wait.
                            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
                            Ok(serde_json::Value::Null)
                        })
                    })
                    .await
            } else {
                // Spread over the local ones' window, so they overlap.
                tokio::time::sleep(std::time::Duration::from_millis(i as u64)).await;
                let effect = EffectFn(move |_ctx: EffectCtx| {
                    let sent = sent.clone();
                    async move {
                        sent.fetch_add(1, Ordering::SeqCst);
                        EffectOutcome::done_with_ref("hook")
                    }
                });
                keyed.run(&key, &payload, &effect).await
            };
            match outcome {
                Ok(Outcome::Done { repeat: false, .. }) => {}
                other => panic!("{key}: {other:?}"),
            }
        }));
    }
    for job in jobs {
        job.await.unwrap();
    }
    let receipts: i64 = sqlx::query_scalar("SELECT count(*) FROM receipts")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(receipts, 30, "one row per local operation");
    assert_eq!(
        sent.load(Ordering::SeqCst),
        30,
        "one send per keyed operation"
    );
}

/// A new record's claim is an insert with SQLite's clock bound, not read
/// back: what it reports must be what it stored, on the database's clock.
#[tokio::test]
async fn a_new_claim_reports_what_it_stored() {
    use onceonly::store::{ClaimRow, OpClaim};
    let store = fresh().await;
    let before = store.now().await.unwrap();
    let claimed = store
        .op_claim(&OpClaim {
            job_type: "mail",
            op_key: "order-1",
            fingerprint: "fp",
            payload: None,
            owner: "worker-1",
            lease: std::time::Duration::from_secs(30),
        })
        .await
        .unwrap();
    let after = store.now().await.unwrap();
    let ClaimRow::Claimed(claim) = claimed else {
        panic!("a new record is claimed: {claimed:?}");
    };
    let stored = store
        .op_get("mail", "order-1")
        .await
        .unwrap()
        .unwrap()
        .record;
    assert_eq!(
        (claim.token, claim.attempts),
        (stored.token, stored.attempts)
    );
    assert_eq!((claim.token, claim.attempts), (1, 1));
    assert_eq!(Some(claim.claimed_at), stored.claimed_at);
    assert_eq!(Some(claim.lease_until), stored.lease_until);
    assert_eq!(claim.lease_until.0 - claim.claimed_at.0, 30_000);
    assert!(
        before <= claim.claimed_at && claim.claimed_at <= after,
        "claimed at {} on the database's clock, read {before}..{after}",
        claim.claimed_at
    );
}

/// The user's own error from a local effect, kept as the error's source.
#[derive(Debug)]
struct CardDeclined;

impl std::fmt::Display for CardDeclined {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("card declined")
    }
}

impl std::error::Error for CardDeclined {}

#[tokio::test]
async fn a_failed_local_effect_keeps_the_users_error_and_leaves_nothing() {
    use onceonly::{EffectCtx, EffectKind, Error, Guard, JobSpec, Payload};
    let store = fresh().await;
    sqlx::query("CREATE TABLE charges (op_key TEXT PRIMARY KEY)")
        .execute(store.pool())
        .await
        .unwrap();
    let guard = Guard::new(store.clone(), JobSpec::new("charge", EffectKind::Local)).unwrap();
    let err = guard
        .run_local("order-7", &Payload::none(), |conn, ctx: &EffectCtx| {
            Box::pin(async move {
                sqlx::query("INSERT INTO charges (op_key) VALUES (?1)")
                    .bind(&ctx.op_key)
                    .execute(&mut *conn)
                    .await?;
                Err(Box::new(CardDeclined) as onceonly::BoxError)
            })
        })
        .await
        .unwrap_err();
    match &err {
        Error::LocalEffect { op_key, source, .. } => {
            assert_eq!(op_key, "order-7");
            assert!(
                source.downcast_ref::<CardDeclined>().is_some(),
                "{source:?}"
            );
        }
        other => panic!("expected LocalEffect, got {other:?}"),
    }
    assert!(std::error::Error::source(&err).is_some());
    let rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM charges")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(rows, 0, "the effect's row rolled back");
    assert!(
        onceonly::ops::get(&store, "charge", "order-7")
            .await
            .is_err(),
        "no record"
    );
}
