//! The console's pages on a table of many records: the overview and the held
//! list, timed through the real server over loopback HTTP (page rendered,
//! session checked) and as library calls, next to baselines measured in the
//! same run: the same answers read without the operator's indexes (the held
//! list through `op_list`, the path `onceonly held` took before; the counts
//! by one GROUP BY over the whole table).
//!
//! ```text
//! cargo run --release -p onceonly-console --example bench -- \
//!     --db sqlite:///tmp/console-bench.db --records 1000000 --iterations 200
//! cargo run --release -p onceonly-console --example bench -- \
//!     --db postgres://postgres@127.0.0.1:5432/test --records 1000000
//! ```
//!
//! `--pg-extra-sql FILE` runs FILE's statements (naming the schema
//! `onceonly`) after the fill, to measure another set of indexes.
//!
//! A fresh SQLite file, or a fresh schema on PostgreSQL, is filled with
//! `--records` records over eight job types, their updates spread over the
//! last seven days: 96% completed, 2% failed, 1% cancelled, 0.5% queued,
//! 0.3% claimed (a third of them past their lease), 0.2% held. It prints the
//! query plans, then p50/p99 for each measurement.

use std::future::Future;
use std::time::{Duration, Instant};

use onceonly::db_url::DbKind;
use onceonly::operator::{self, OperatorStore, Which};
use onceonly::store::OpList;
use onceonly::{State, Store};
use onceonly_console::{serve, Options};
use onceonly_postgres::{PgOptions, PgStore};
use onceonly_sqlite::SqliteStore;

const WINDOW: Duration = Duration::from_secs(3600);
const SPREAD_MS: i64 = 7 * 24 * 3600 * 1000;

struct Args {
    /// Statements run after the fill, in the store's schema (PostgreSQL):
    /// to measure another set of indexes.
    extra_sql: Option<String>,
    db: String,
    records: i64,
    iterations: usize,
}

fn args() -> Args {
    let mut a = Args {
        extra_sql: None,
        db: "sqlite:///tmp/onceonly-console-bench.db".into(),
        records: 1_000_000,
        iterations: 200,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--db" => a.db = value,
            "--records" => a.records = value.parse().expect("--records N"),
            "--iterations" => a.iterations = value.parse().expect("--iterations N"),
            "--pg-extra-sql" => {
                a.extra_sql = Some(std::fs::read_to_string(&value).expect("--pg-extra-sql FILE"))
            }
            other => panic!("unknown flag {other}"),
        }
    }
    a
}

/// The state of record `i` (per mille), as the module doc says.
const STATE_SQL: &str =
    "CASE WHEN i % 1000 < 960 THEN 'completed' WHEN i % 1000 < 980 THEN 'failed' \
     WHEN i % 1000 < 990 THEN 'cancelled' WHEN i % 1000 < 995 THEN 'queued' \
     WHEN i % 1000 < 998 THEN 'claimed' ELSE 'held' END";

/// The fill: `{n}` records, `{now}` the clock; `{cast}` turns an integer
/// expression into text.
fn fill_sql(table: &str, series: &str, n: i64, now: i64) -> String {
    let updated = format!("({now} - (i * {SPREAD_MS} / {n}))");
    format!(
        "INSERT INTO {table} (job_type, op_key, state, token, owner, attempts, fingerprint, payload, \
           external_ref, result, cancel_requested, error, due_at, claimed_at, lease_until, \
           created_at, updated_at, completed_at) \
         SELECT 'job_' || (i % 8), 'key-' || i, {STATE_SQL}, 1, 'worker-' || (i % 16), 1, \
           'f' || i, '{{\"n\":' || i || '}}', \
           CASE WHEN i % 1000 < 960 THEN 'ref-' || i END, NULL, {false_}, NULL, \
           CASE WHEN i % 1000 BETWEEN 990 AND 994 THEN {updated} END, \
           CASE WHEN i % 1000 < 990 OR i % 1000 >= 995 THEN {updated} - 500 END, \
           CASE WHEN i % 1000 BETWEEN 995 AND 997 THEN \
             CASE WHEN i % 3 = 0 THEN {updated} + 100 ELSE {now} + 3600000 END END, \
           {updated} - 1000, {updated}, \
           CASE WHEN i % 1000 < 960 THEN {updated} END \
         FROM {series}",
        false_ = if table.contains('.') { "false" } else { "0" },
    )
}

fn audit_sql(table: &str, series: &str, n: i64, now: i64) -> String {
    format!(
        "INSERT INTO {table} (job_type, op_key, at, event, actor, token, from_state, to_state, detail) \
         SELECT 'job_' || (i % 8), 'key-' || i, {now} - (i * {SPREAD_MS} / {n}), \
           CASE WHEN i % 3 = 0 THEN 'take_over' WHEN i % 3 = 1 THEN 'hold' ELSE 'resolved' END, \
           'bench', 1, 'claimed', 'held', 'bench' FROM {series}"
    )
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// p50 and p99 of `samples`, in ms.
fn report(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let at = |q: f64| {
        let i = ((samples.len() as f64 * q).ceil() as usize).clamp(1, samples.len()) - 1;
        samples[i].as_secs_f64() * 1000.0
    };
    println!(
        "{name:<58} p50 {:>8.2} ms  p99 {:>8.2} ms  max {:>8.2} ms  (n={})",
        at(0.50),
        at(0.99),
        at(1.0),
        samples.len()
    );
}

async fn timed<F, Fut, T>(iterations: usize, mut f: F) -> Vec<Duration>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = T>,
{
    let mut samples = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let started = Instant::now();
        std::hint::black_box(f().await);
        samples.push(started.elapsed());
    }
    samples
}

/// Times the pages over HTTP, the library calls behind them, and the
/// baselines, interleaved round by round so a busy machine slows all alike.
async fn measure<S: OperatorStore + Clone>(
    store: S,
    db: &str,
    iterations: usize,
    raw_counts: impl Fn() -> std::pin::Pin<Box<dyn Future<Output = i64> + Send>>,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (app_store, options) = (store.clone(), Options::new(db));
    tokio::spawn(async move { serve(app_store, options, listener).await.unwrap() });
    let c = reqwest::Client::builder()
        .cookie_store(true)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    c.post(format!("{base}/login"))
        .form(&[("name", "bench"), ("next", "/")])
        .send()
        .await
        .unwrap();
    let page = |path: &'static str| {
        let c = c.clone();
        let url = format!("{base}{path}");
        async move {
            let res = c.get(&url).send().await.unwrap();
            assert_eq!(res.status(), 200, "{url}");
            res.text().await.unwrap().len()
        }
    };
    // Warm the caches once.
    page("/").await;
    page("/held").await;

    let names = [
        "GET / (overview page, HTTP)",
        "GET /held (held list page 1, HTTP)",
        "operator::overview (library)",
        "operator::list held, 51 rows (library)",
        "baseline: op_list state=held (onceonly held before)",
        "baseline: GROUP BY job_type, state over the table",
    ];
    let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); names.len()];
    let per_round = 10.min(iterations).max(1);
    let rounds = iterations.div_ceil(per_round);
    for _ in 0..rounds {
        samples[0].extend(timed(per_round, || page("/")).await);
        samples[1].extend(timed(per_round, || page("/held")).await);
        samples[2].extend(
            timed(per_round, || async {
                operator::overview(&store, WINDOW).await.unwrap()
            })
            .await,
        );
        samples[3].extend(
            timed(per_round, || async {
                operator::list(&store, Which::Held, None, Some(51), 0)
                    .await
                    .unwrap()
            })
            .await,
        );
        // The baselines are slow on a large table: fewer of them.
        samples[4].extend(
            timed(2, || async {
                store
                    .op_list(&OpList {
                        state: Some(State::Held),
                        ..OpList::default()
                    })
                    .await
                    .unwrap()
                    .len()
            })
            .await,
        );
        samples[5].extend(timed(2, &raw_counts).await);
    }
    for (name, s) in names.into_iter().zip(samples) {
        report(name, s);
    }
}

async fn sqlite(a: &Args) {
    let path = a.db.trim_start_matches("sqlite://");
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{path}{suffix}"));
    }
    let store = SqliteStore::connect(&a.db).await.unwrap();
    store.migrate().await.unwrap();
    let n = a.records;
    let now = now_ms();
    let started = Instant::now();
    let series = format!(
        "(WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i + 1 < {n}) SELECT i FROM s)"
    );
    let audits = (n / 100).max(1);
    let audit_series = format!(
        "(WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i + 1 < {audits}) SELECT i FROM s)"
    );
    sqlx::query(&fill_sql("onceonly_ops", &series, n, now))
        .execute(store.pool())
        .await
        .unwrap();
    sqlx::query(&audit_sql("onceonly_audit", &audit_series, audits, now))
        .execute(store.pool())
        .await
        .unwrap();
    println!(
        "SQLite {}: {n} records, {audits} audit events, filled in {:.1}s",
        a.db,
        started.elapsed().as_secs_f64()
    );
    let plans = [
        (
            "operator_live.sql",
            include_str!("../../onceonly-sqlite/queries/operator_live.sql"),
            1,
        ),
        (
            "operator_finished.sql",
            include_str!("../../onceonly-sqlite/queries/operator_finished.sql"),
            2,
        ),
        (
            "operator_events.sql",
            include_str!("../../onceonly-sqlite/queries/operator_events.sql"),
            2,
        ),
        (
            "operator_held.sql",
            include_str!("../../onceonly-sqlite/queries/operator_held.sql"),
            4,
        ),
        (
            "operator_stuck.sql",
            include_str!("../../onceonly-sqlite/queries/operator_stuck.sql"),
            4,
        ),
    ];
    for (name, sql, params) in plans {
        let mut q = sqlx::query_as::<_, (i64, i64, i64, String)>(Box::leak(
            format!("EXPLAIN QUERY PLAN {sql}").into_boxed_str(),
        ));
        for p in 0..params {
            q = match p {
                1 if params == 4 => q.bind(None::<String>),
                _ => q.bind(0_i64),
            };
        }
        let rows = q.fetch_all(store.pool()).await.unwrap();
        println!("plan {name}:");
        for (_, _, _, detail) in rows {
            println!("    {detail}");
        }
    }
    let pool = store.pool().clone();
    let raw = move || {
        let pool = pool.clone();
        Box::pin(async move {
            sqlx::query(
                "SELECT job_type, state, count(*) FROM onceonly_ops GROUP BY job_type, state",
            )
            .fetch_all(&pool)
            .await
            .unwrap()
            .len() as i64
        }) as std::pin::Pin<Box<dyn Future<Output = i64> + Send>>
    };
    measure(store, &a.db, a.iterations, raw).await;
}

async fn postgres(a: &Args) {
    let schema = format!("console_bench_{}", std::process::id());
    let options = PgOptions::default().schema(&schema).max_connections(4);
    let store = PgStore::connect_with(&a.db, options).await.unwrap();
    store.migrate().await.unwrap();
    let n = a.records;
    let now = now_ms();
    let started = Instant::now();
    let audits = (n / 100).max(1);
    sqlx::query(&fill_sql(
        &format!("{schema}.ops"),
        &format!("generate_series(0::bigint, {}) AS s(i)", n - 1),
        n,
        now,
    ))
    .execute(store.pool())
    .await
    .unwrap();
    sqlx::query(&audit_sql(
        &format!("{schema}.audit"),
        &format!("generate_series(0::bigint, {}) AS s(i)", audits - 1),
        audits,
        now,
    ))
    .execute(store.pool())
    .await
    .unwrap();
    if let Some(extra) = &a.extra_sql {
        let extra = onceonly_postgres::sql::in_schema(extra, &schema);
        sqlx::raw_sql(&extra).execute(store.pool()).await.unwrap();
        println!("ran --pg-extra-sql in {schema}");
    }
    sqlx::query(&format!("ANALYZE {schema}.ops"))
        .execute(store.pool())
        .await
        .unwrap();
    sqlx::query(&format!("ANALYZE {schema}.audit"))
        .execute(store.pool())
        .await
        .unwrap();
    println!(
        "PostgreSQL schema {schema}: {n} records, {audits} audit events, filled in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    let plans = [
        (
            "operator_live.sql",
            include_str!("../../onceonly-postgres/queries/operator_live.sql"),
            "0",
        ),
        (
            "operator_finished.sql",
            include_str!("../../onceonly-postgres/queries/operator_finished.sql"),
            "0, 3600000",
        ),
        (
            "operator_events.sql",
            include_str!("../../onceonly-postgres/queries/operator_events.sql"),
            "0, 3600000",
        ),
        (
            "operator_held.sql",
            include_str!("../../onceonly-postgres/queries/operator_held.sql"),
            "0, NULL, 51, 0",
        ),
        (
            "operator_stuck.sql",
            include_str!("../../onceonly-postgres/queries/operator_stuck.sql"),
            "0, NULL, 51, 0",
        ),
    ];
    for (name, sql, args) in plans {
        let sql = onceonly_postgres::sql::in_schema(sql, &schema);
        // The parameters' types, as the store binds them.
        let types = match args.matches(',').count() {
            0 => "bigint",
            1 => "bigint, bigint",
            _ => "bigint, text, bigint, bigint",
        };
        let mut conn = store.pool().acquire().await.unwrap();
        sqlx::query(&format!("PREPARE p({types}) AS {sql}"))
            .execute(&mut *conn)
            .await
            .unwrap();
        let rows: Vec<(String,)> =
            sqlx::query_as(&format!("EXPLAIN (COSTS OFF) EXECUTE p({args})"))
                .fetch_all(&mut *conn)
                .await
                .unwrap();
        sqlx::query("DEALLOCATE p")
            .execute(&mut *conn)
            .await
            .unwrap();
        println!("plan {name}:");
        for (line,) in rows {
            println!("    {line}");
        }
    }
    let pool = store.pool().clone();
    let table = format!("{schema}.ops");
    let raw = move || {
        let pool = pool.clone();
        let sql = format!("SELECT job_type, state, count(*) FROM {table} GROUP BY job_type, state");
        Box::pin(async move { sqlx::query(&sql).fetch_all(&pool).await.unwrap().len() as i64 })
            as std::pin::Pin<Box<dyn Future<Output = i64> + Send>>
    };
    measure(store.clone(), &a.db, a.iterations, raw).await;
    sqlx::query(&format!("DROP SCHEMA {schema} CASCADE"))
        .execute(store.pool())
        .await
        .unwrap();
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let a = args();
    println!(
        "console bench: {} iterations per page; the machine is shared (2 cores), baselines run in the same rounds",
        a.iterations
    );
    match DbKind::of(&a.db).unwrap() {
        DbKind::Sqlite => sqlite(&a).await,
        DbKind::Postgres => postgres(&a).await,
        DbKind::MySql => panic!("the console bench does not run on MySQL yet"),
    }
}
