//! `onceonly bench`: guarded operations against the same SQL statements run
//! raw, in the same process and the same run, on SQLite and PostgreSQL, at
//! concurrency 1 and 16, for a no-op keyed effect and a local effect.

mod relay;
mod targets;

use std::future::Future;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use onceonly::{EffectCtx, EffectFn, EffectKind, EffectOutcome, Guard, JobSpec, Outcome, Payload};
use serde::Serialize;

use targets::{BenchTarget, PgTarget, SqliteTarget};

/// Arguments of `onceonly bench`.
#[derive(clap::Args)]
pub struct Args {
    /// Operations per measurement.
    #[arg(long, default_value_t = 20_000)]
    ops: usize,
    /// PostgreSQL to measure on (a fresh schema, dropped afterwards); the
    /// global --db is used when it is a postgres:// URL.
    #[arg(
        long,
        env = "ONCEONLY_BENCH_PG",
        default_value = "postgres://postgres@127.0.0.1:5432/test"
    )]
    pg: String,
    /// One JSON object per line instead of a table.
    #[arg(long)]
    json: bool,
    /// Only these stores (sqlite, postgres).
    #[arg(long, value_delimiter = ',', default_value = "sqlite,postgres")]
    stores: Vec<String>,
    /// Only these effects (keyed, local).
    #[arg(long, value_delimiter = ',', default_value = "keyed,local")]
    effects: Vec<String>,
    /// Only these concurrencies.
    #[arg(long, value_delimiter = ',', default_value = "1,16")]
    concurrency: Vec<usize>,
    /// SQLite pool size (1: one writer, queued in the pool).
    #[arg(long, default_value_t = 1)]
    sqlite_connections: u32,
    /// Measure the relay draining a queue instead (batched and not).
    #[arg(long)]
    relay: bool,
    /// Relay batch sizes to measure (1 = no batching).
    #[arg(long, value_delimiter = ',', default_value = "1,500")]
    batches: Vec<u32>,
    /// Relay destinations to measure (noop, http, https).
    #[arg(long, value_delimiter = ',', default_value = "noop,http")]
    destinations: Vec<String>,
    /// Concurrent claim loops of the relay and of its raw baseline.
    #[arg(long, default_value_t = 4)]
    relay_workers: usize,
}

/// One measured line.
#[derive(Serialize)]
struct Row {
    store: &'static str,
    effect: &'static str,
    concurrency: usize,
    ops: usize,
    ops_per_s: f64,
    p50_ms: f64,
    p99_ms: f64,
    raw_ops_per_s: f64,
    raw_p50_ms: f64,
    raw_p99_ms: f64,
    ratio: f64,
}

/// Runs every measurement and prints it.
pub async fn run(db: &str, args: Args) -> anyhow::Result<ExitCode> {
    let pg_url = if db.starts_with("postgres") {
        db.to_owned()
    } else {
        args.pg.clone()
    };
    if args.relay {
        return run_relay(&pg_url, &args).await;
    }
    let mut rows = Vec::new();
    if !args.json {
        print_header();
    }
    for store in &args.stores {
        match store.as_str() {
            "sqlite" => {
                let target = SqliteTarget::new(args.sqlite_connections).await?;
                measure_all(&target, &args, &mut rows).await?;
            }
            "postgres" => match PgTarget::new(&pg_url).await {
                Ok(target) => {
                    let measured = measure_all(&target, &args, &mut rows).await;
                    target.drop_schema().await;
                    measured?;
                }
                Err(e) => eprintln!("bench: PostgreSQL skipped: {e}"),
            },
            other => anyhow::bail!("--stores: unknown store {other:?}; sqlite or postgres"),
        }
    }
    let peak = peak_rss_mib();
    if args.json {
        println!("{}", serde_json::json!({ "peak_rss_mib": peak }));
    } else {
        println!("peak memory (VmHWM): {peak:.1} MiB");
    }
    Ok(ExitCode::SUCCESS)
}

async fn run_relay(pg_url: &str, args: &Args) -> anyhow::Result<ExitCode> {
    for store in &args.stores {
        match store.as_str() {
            "sqlite" => {
                let target = SqliteTarget::new(args.sqlite_connections).await?;
                relay::measure(&target, &relay_args(args)).await?;
            }
            "postgres" => match PgTarget::new(pg_url).await {
                Ok(target) => {
                    let measured = relay::measure(&target, &relay_args(args)).await;
                    target.drop_schema().await;
                    measured?;
                }
                Err(e) => eprintln!("bench: PostgreSQL skipped: {e}"),
            },
            other => anyhow::bail!("--stores: unknown store {other:?}; sqlite or postgres"),
        }
    }
    println!("peak memory (VmHWM): {:.1} MiB", peak_rss_mib());
    Ok(ExitCode::SUCCESS)
}

fn relay_args(args: &Args) -> relay::RelayArgs<'_> {
    relay::RelayArgs {
        ops: args.ops,
        batches: &args.batches,
        destinations: &args.destinations,
        workers: args.relay_workers,
        json: args.json,
    }
}

async fn measure_all<T: BenchTarget>(
    target: &T,
    args: &Args,
    rows: &mut Vec<Row>,
) -> anyhow::Result<()> {
    for effect in ["keyed", "local"] {
        if !args.effects.iter().any(|e| e == effect) {
            continue;
        }
        for &concurrency in &args.concurrency {
            let prefix = format!("{effect}-c{concurrency}");
            let raw = timed(args.ops, concurrency, |i| {
                let key = format!("raw-{prefix}-{i}");
                async move {
                    match effect {
                        "keyed" => target.raw_keyed(&key).await,
                        _ => target.raw_local(&key).await,
                    }
                }
            })
            .await?;
            let guarded = match effect {
                "keyed" => guarded_keyed(target, args.ops, concurrency, &prefix).await?,
                _ => guarded_local(target, args.ops, concurrency, &prefix).await?,
            };
            let row = Row {
                store: T::NAME,
                effect,
                concurrency,
                ops: args.ops,
                ops_per_s: guarded.ops_per_s,
                p50_ms: guarded.p50_ms,
                p99_ms: guarded.p99_ms,
                raw_ops_per_s: raw.ops_per_s,
                raw_p50_ms: raw.p50_ms,
                raw_p99_ms: raw.p99_ms,
                ratio: guarded.ops_per_s / raw.ops_per_s,
            };
            if args.json {
                println!("{}", serde_json::to_string(&row)?);
            } else {
                print_row(&row);
            }
            rows.push(row);
        }
    }
    Ok(())
}

async fn guarded_keyed<T: BenchTarget>(
    target: &T,
    ops: usize,
    concurrency: usize,
    prefix: &str,
) -> anyhow::Result<Timing> {
    let spec = JobSpec::new("bench_keyed", EffectKind::Keyed);
    let guard = Guard::new(target.store().clone(), spec)?;
    let noop =
        EffectFn(|ctx: EffectCtx| async move { EffectOutcome::done_with_ref(ctx.idempotency_key) });
    let payload = Payload::none();
    timed(ops, concurrency, |i| {
        let (guard, noop, payload) = (&guard, &noop, &payload);
        let key = format!("{prefix}-{i}");
        async move {
            match guard.run(&key, payload, noop).await? {
                Outcome::Done { repeat: false, .. } => Ok(()),
                other => anyhow::bail!("bench op {key} did not complete: {other:?}"),
            }
        }
    })
    .await
}

async fn guarded_local<T: BenchTarget>(
    target: &T,
    ops: usize,
    concurrency: usize,
    prefix: &str,
) -> anyhow::Result<Timing> {
    let spec = JobSpec::new("bench_local", EffectKind::Local);
    let guard = Guard::new(target.store().clone(), spec)?;
    let payload = Payload::none();
    let sql = target.effect_sql();
    timed(ops, concurrency, |i| {
        let (guard, payload, sql) = (&guard, &payload, sql.clone());
        let key = format!("{prefix}-{i}");
        async move {
            let outcome = guard
                .run_local(&key, payload, move |conn, ctx| {
                    Box::pin(T::insert_effect(sql, conn, ctx))
                })
                .await?;
            match outcome {
                Outcome::Done { repeat: false, .. } => Ok(()),
                other => anyhow::bail!("bench op {key} did not complete: {other:?}"),
            }
        }
    })
    .await
}

/// Throughput and latency of one measurement.
struct Timing {
    ops_per_s: f64,
    p50_ms: f64,
    p99_ms: f64,
}

/// Runs `ops` operations, `concurrency` at a time, and times each.
async fn timed<F, Fut>(ops: usize, concurrency: usize, op: F) -> anyhow::Result<Timing>
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    use futures::stream::{self, StreamExt, TryStreamExt};
    let op = Arc::new(op);
    let start = Instant::now();
    let mut latencies: Vec<Duration> = stream::iter(0..ops)
        .map(|i| {
            let op = op.clone();
            async move {
                let t = Instant::now();
                op(i).await?;
                Ok::<_, anyhow::Error>(t.elapsed())
            }
        })
        .buffer_unordered(concurrency.max(1))
        .try_collect()
        .await?;
    let elapsed = start.elapsed();
    latencies.sort_unstable();
    let pct = |p: f64| {
        let i = ((latencies.len() as f64 * p).ceil() as usize).clamp(1, latencies.len()) - 1;
        latencies[i].as_secs_f64() * 1000.0
    };
    Ok(Timing {
        ops_per_s: ops as f64 / elapsed.as_secs_f64(),
        p50_ms: pct(0.50),
        p99_ms: pct(0.99),
    })
}

fn print_header() {
    println!(
        "{:<9} {:<6} {:>4} {:>11} {:>8} {:>8} {:>11} {:>8} {:>8} {:>6}",
        "store",
        "effect",
        "conc",
        "guarded/s",
        "p50 ms",
        "p99 ms",
        "raw/s",
        "p50 ms",
        "p99 ms",
        "ratio"
    );
}

fn print_row(r: &Row) {
    println!(
        "{:<9} {:<6} {:>4} {:>11.0} {:>8.3} {:>8.3} {:>11.0} {:>8.3} {:>8.3} {:>6.2}",
        r.store,
        r.effect,
        r.concurrency,
        r.ops_per_s,
        r.p50_ms,
        r.p99_ms,
        r.raw_ops_per_s,
        r.raw_p50_ms,
        r.raw_p99_ms,
        r.ratio
    );
}

/// Peak resident memory of this process (Linux VmHWM), in MiB.
fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|kb| kb.parse::<f64>().ok())
            })
        })
        .map_or(0.0, |kb| kb / 1024.0)
}
