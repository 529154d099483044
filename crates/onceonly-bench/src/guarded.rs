//! Guarded operations against the same SQL run raw, and on PostgreSQL and
//! MySQL against the minimal two-statement operation.

use onceonly::{EffectCtx, EffectFn, EffectKind, EffectOutcome, Guard, JobSpec, Outcome, Payload};
use serde::Serialize;

use crate::targets::BenchTarget;
use crate::timing::{timed, Timing};
use crate::{on_each_store, Config, Report};

/// What [`guarded`] measures beyond [`Config`].
#[derive(Debug, Clone)]
pub struct GuardedOptions {
    /// Effects: `keyed` (a no-op keyed effect) and `local` (a row inserted
    /// in the user's transaction); others are skipped.
    pub effects: Vec<String>,
    /// Operations in flight at once, one measurement each.
    pub concurrency: Vec<usize>,
    /// PostgreSQL and MySQL keyed rows: run the minimal operation's baselines.
    pub minimal: bool,
}

/// One measured line.
#[derive(Debug, Clone, Serialize)]
pub struct GuardedRow {
    /// `sqlite`, `postgres` or `mysql`.
    pub store: &'static str,
    /// `keyed` or `local`.
    pub effect: &'static str,
    /// Operations in flight at once.
    pub concurrency: usize,
    /// Operations measured.
    pub ops: usize,
    /// Guarded operations per second.
    pub ops_per_s: f64,
    /// Guarded latency, median.
    pub p50_ms: f64,
    /// Guarded latency, 99th percentile.
    pub p99_ms: f64,
    /// The store's own statements run raw, per second.
    pub raw_ops_per_s: f64,
    /// Raw latency, median.
    pub raw_p50_ms: f64,
    /// Raw latency, 99th percentile.
    pub raw_p99_ms: f64,
    /// Guarded over raw.
    pub ratio: f64,
    /// The minimal two-statement operation by sqlx (PostgreSQL and MySQL keyed).
    pub minimal_ops_per_s: Option<f64>,
    /// Guarded over the minimal operation by sqlx.
    pub vs_minimal: Option<f64>,
    /// The load tool that ran the minimal operation: `pgbench` or
    /// `mariadb-slap`, when installed.
    pub load_tool: Option<&'static str>,
    /// The minimal operation by the load tool, per second.
    pub load_tool_ops_per_s: Option<f64>,
    /// Guarded over the load tool's minimal operation.
    pub vs_load_tool: Option<f64>,
    /// PostgreSQL: calls per batch statement in the guarded run.
    pub calls_per_batch: Option<f64>,
}

/// Measures every store, effect and concurrency of `config` and `options`,
/// handing each row to `report` as it is measured.
pub async fn guarded(
    config: &Config,
    options: &GuardedOptions,
    report: &mut dyn Report,
) -> anyhow::Result<()> {
    on_each_store!(config, report, |target| measure_all(
        &target, config, options, report
    )
    .await);
    Ok(())
}

async fn measure_all<T: BenchTarget>(
    target: &T,
    config: &Config,
    options: &GuardedOptions,
    report: &mut dyn Report,
) -> anyhow::Result<()> {
    let ops = config.ops;
    for effect in ["keyed", "local"] {
        if !options.effects.iter().any(|e| e == effect) {
            continue;
        }
        for &concurrency in &options.concurrency {
            let prefix = format!("{effect}-c{concurrency}");
            let raw = timed(ops, concurrency, |i| {
                let key = format!("raw-{prefix}-{i}");
                async move {
                    match effect {
                        "keyed" => target.raw_keyed(&key).await,
                        _ => target.raw_local(&key).await,
                    }
                }
            })
            .await?;
            let batches_before = target.batch_stats();
            let guarded = match effect {
                "keyed" => guarded_keyed(target, ops, concurrency, &prefix).await?,
                _ => guarded_local(target, ops, concurrency, &prefix).await?,
            };
            let calls_per_batch = batches_before
                .zip(target.batch_stats())
                .map(|(a, b)| (b.calls - a.calls) as f64 / (b.batches - a.batches).max(1) as f64);
            let (minimal, tool) = match target.minimal() {
                Some(m) if effect == "keyed" && options.minimal => {
                    let by_sqlx = timed(ops, concurrency, |i| {
                        let key = format!("min-{prefix}-{i}");
                        async move { m.op(&key).await }
                    })
                    .await?;
                    let by_tool = match m.load_tool(concurrency, ops).await {
                        Ok(per_s) => per_s.map(|p| (m.tool(), p)),
                        Err(e) => {
                            report.note(&format!("{} baseline skipped: {e:#}", m.tool()));
                            None
                        }
                    };
                    (Some(by_sqlx.ops_per_s), by_tool)
                }
                _ => (None, None),
            };
            report.guarded(&GuardedRow {
                store: T::NAME,
                effect,
                concurrency,
                ops,
                ops_per_s: guarded.ops_per_s,
                p50_ms: guarded.p50_ms,
                p99_ms: guarded.p99_ms,
                raw_ops_per_s: raw.ops_per_s,
                raw_p50_ms: raw.p50_ms,
                raw_p99_ms: raw.p99_ms,
                ratio: guarded.ops_per_s / raw.ops_per_s,
                minimal_ops_per_s: minimal,
                vs_minimal: minimal.map(|m| guarded.ops_per_s / m),
                load_tool: tool.map(|(name, _)| name),
                load_tool_ops_per_s: tool.map(|(_, p)| p),
                vs_load_tool: tool.map(|(_, p)| guarded.ops_per_s / p),
                calls_per_batch,
            })?;
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
