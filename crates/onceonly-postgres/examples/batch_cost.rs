//! What one guarded keyed operation costs the database, counted rather than
//! timed: commits, WAL flushes, WAL records and bytes, statements, and the
//! CPU of the server's backends, per operation, over a run of `Guard::run`
//! (a no-op keyed effect) at one concurrency. Counts hold on a loaded
//! machine, where wall-clock rates move by a third from run to run.
//!
//!     cargo run --release -p onceonly-postgres --example batch_cost -- \
//!         URL OPS CONCURRENCY LANES [MAX_BATCH]
//!
//! Give it a database of its own: commits are counted per database (WAL
//! counters are the whole server's, so other databases' writes show in
//! them). Batch statements are the store's own count. Server CPU is read
//! from `/proc/<pid>/stat` of the database's backends, so PostgreSQL must
//! run on this machine. It waits 11 s before each reading, for the
//! backends' statistics to be reported.

use std::time::Instant;

use futures::stream::{self, StreamExt, TryStreamExt};
use onceonly::{EffectCtx, EffectFn, EffectKind, EffectOutcome, Guard, JobSpec, Outcome, Payload};
use onceonly_postgres::{PgOptions, PgStore};
use sqlx::Row;

/// The database's counters at one moment.
#[derive(Debug, Clone, Copy)]
struct Counters {
    commits: i64,
    wal_records: i64,
    wal_bytes: i64,
    wal_syncs: i64,
    backend_cpu_ticks: i64,
}

async fn counters(store: &PgStore) -> Counters {
    // Backends report their counts when idle, at most once a second and
    // within 10 s at the latest (PostgreSQL 15): wait for every report.
    tokio::time::sleep(std::time::Duration::from_secs(11)).await;
    let pool = store.pool();
    sqlx::query("SELECT pg_stat_clear_snapshot()")
        .execute(pool)
        .await
        .unwrap();
    let db =
        sqlx::query("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")
            .fetch_one(pool)
            .await
            .unwrap();
    let wal = sqlx::query(
        "SELECT wal_records, wal_bytes::bigint AS wal_bytes, wal_sync FROM pg_stat_wal",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    let pids: Vec<i32> =
        sqlx::query_scalar("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
            .fetch_all(pool)
            .await
            .unwrap();
    Counters {
        commits: db.get("xact_commit"),
        wal_records: wal.get("wal_records"),
        wal_bytes: wal.get("wal_bytes"),
        wal_syncs: wal.get("wal_sync"),
        backend_cpu_ticks: pids.into_iter().map(cpu_ticks).sum(),
    }
}

/// utime + stime of process `pid`, in clock ticks (0 when it is gone).
fn cpu_ticks(pid: i32) -> i64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0;
    };
    // Fields after the command name (which may hold spaces): state is 3rd,
    // utime 14th, stime 15th.
    let rest = &stat[stat.rfind(')').map_or(0, |i| i + 2)..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    fields[11].parse::<i64>().unwrap_or(0) + fields[12].parse::<i64>().unwrap_or(0)
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, default: &str| args.get(i).cloned().unwrap_or_else(|| default.to_owned());
    let url = arg(0, "postgres://postgres@127.0.0.1/test");
    let ops: usize = arg(1, "20000").parse().expect("OPS");
    let concurrency: usize = arg(2, "16").parse().expect("CONCURRENCY");
    let lanes: usize = arg(3, "2").parse().expect("LANES");
    let max_batch: usize = arg(4, "256").parse().expect("MAX_BATCH");

    let schema = format!("batch_cost_{}", std::process::id());
    let options = PgOptions::default()
        .schema(&schema)
        .max_connections(4)
        .batch_lanes(lanes)
        .max_batch(max_batch);
    let store = PgStore::connect_with(&url, options).await.unwrap();
    onceonly::Store::migrate(&store).await.unwrap();
    let guard = Guard::new(store.clone(), JobSpec::new("cost", EffectKind::Keyed)).unwrap();
    let noop =
        EffectFn(|ctx: EffectCtx| async move { EffectOutcome::done_with_ref(ctx.idempotency_key) });
    let payload = Payload::none();
    let run = |prefix: &'static str, n: usize| {
        let (guard, noop, payload) = (&guard, &noop, &payload);
        stream::iter(0..n)
            .map(move |i| async move {
                let key = format!("{prefix}-{i:08}");
                match guard.run(&key, payload, noop).await {
                    Ok(Outcome::Done { repeat: false, .. }) => Ok(()),
                    other => Err(format!("{key}: {other:?}")),
                }
            })
            .buffer_unordered(concurrency)
            .try_collect::<()>()
    };
    // Warm up: connections open, statements prepared.
    run("warm", 200).await.unwrap();

    let batches_before = store.batch_stats().unwrap_or_default();
    let before = counters(&store).await;
    let start = Instant::now();
    run("op", ops).await.unwrap();
    let secs = start.elapsed().as_secs_f64();
    let after = counters(&store).await;
    let batches = store.batch_stats().unwrap_or_default();

    let per_op = |d: i64| d as f64 / ops as f64;
    let ticks_per_s = 100.0; // CLK_TCK on Linux
    let statements = batches.batches - batches_before.batches;
    let calls = batches.calls - batches_before.calls;
    println!(
        "ops {ops} c{concurrency} lanes {lanes} max_batch {max_batch}: {:.0} ops/s; per op: \
         commits {:.3}, wal_syncs {:.3}, wal_records {:.2}, wal_bytes {:.0}, batch statements {:.3}, \
         server cpu {:.0} us; calls per batch {:.1}; one-by-one batches {}",
        ops as f64 / secs,
        per_op(after.commits - before.commits),
        per_op(after.wal_syncs - before.wal_syncs),
        per_op(after.wal_records - before.wal_records),
        per_op(after.wal_bytes - before.wal_bytes),
        statements as f64 / ops as f64,
        per_op(after.backend_cpu_ticks - before.backend_cpu_ticks) / ticks_per_s * 1e6,
        calls as f64 / statements.max(1) as f64,
        batches.one_by_one - batches_before.one_by_one,
    );
    sqlx::query(&format!("DROP SCHEMA \"{schema}\" CASCADE"))
        .execute(store.pool())
        .await
        .unwrap();
}
