//! `onceonly bench --relay`: the relay draining a queue, batched and not,
//! through a no-op in-process destination and the HTTP destination on
//! loopback, next to the same claim and completion statements run alone.

use std::time::{Duration, Instant};

use onceonly::relay::{Relay, RelayConfig};
use onceonly::store::{Completion, OpClaimBatch, OpCompleteBatch, OpList};
use onceonly::{
    Effect, EffectCtx, EffectFn, EffectKind, EffectOutcome, Guard, JobSpec, Move, Payload, Record,
    State, Store,
};
use onceonly_http::test_server::{Mode, TestServer};
use onceonly_http::{ClientOptions, HttpDestination, Shape};
use serde::Serialize;

use crate::targets::BenchTarget;
use crate::{on_each_store, Config, Report};

/// What [`relay`] measures beyond [`Config`].
#[derive(Debug, Clone)]
pub struct RelayOptions {
    /// Batch sizes (1 = no batching). A batched measurement runs
    /// [`Config::ops`] operations, an unbatched one a fifth of it.
    pub batches: Vec<u32>,
    /// Destinations: `noop` (in-process), `http`, `https` (a test
    /// destination on loopback that dedups on the key).
    pub destinations: Vec<String>,
    /// Claim loops of the relay and of the raw baseline.
    pub workers: usize,
}

impl RelayOptions {
    /// Refuses a destination that is not `noop`, `http` or `https`.
    pub fn check(&self) -> Result<(), String> {
        match self
            .destinations
            .iter()
            .find(|d| !matches!(d.as_str(), "noop" | "http" | "https"))
        {
            Some(other) => Err(format!("unknown {other:?}; noop, http or https")),
            None => Ok(()),
        }
    }
}

/// One measured relay line.
#[derive(Debug, Clone, Serialize)]
pub struct RelayRow {
    /// `sqlite` or `postgres`.
    pub store: &'static str,
    /// `noop`, `http` or `https`.
    pub destination: &'static str,
    /// Rows claimed per statement.
    pub batch: u32,
    /// Claim loops.
    pub workers: usize,
    /// Operations drained.
    pub ops: usize,
    /// Operations per second, enqueued before the drain starts.
    pub ops_per_s: f64,
    /// Claim to completion (the database's clock), median.
    pub claim_to_done_p50_ms: f64,
    /// Claim to completion, 99th percentile.
    pub claim_to_done_p99_ms: f64,
    /// Enqueue to completion, median.
    pub enqueue_to_done_p50_ms: f64,
    /// Enqueue to completion, 99th percentile.
    pub enqueue_to_done_p99_ms: f64,
    /// The same claims and completions without guard or effect, per second.
    pub raw_ops_per_s: f64,
    /// Relay over raw.
    pub ratio: f64,
}

/// Measures the relay on each store of `config`, for each destination and
/// batch size, handing each row to `report`.
pub async fn relay(
    config: &Config,
    options: &RelayOptions,
    report: &mut dyn Report,
) -> anyhow::Result<()> {
    options.check().map_err(anyhow::Error::msg)?;
    on_each_store!(config, report, |target| measure(
        &target, config.ops, options, report
    )
    .await);
    Ok(())
}

async fn measure<T: BenchTarget>(
    target: &T,
    ops: usize,
    options: &RelayOptions,
    report: &mut dyn Report,
) -> anyhow::Result<()> {
    let server = TestServer::start(Mode::Keyed).await?;
    let http = HttpDestination::new(&server.base_url(), Duration::from_secs(5))?;
    let (_tls_server, https) = https_destination().await?;
    let noop =
        EffectFn(|ctx: EffectCtx| async move { EffectOutcome::done_with_ref(ctx.idempotency_key) });
    let workers = options.workers.max(1);
    for &batch in &options.batches {
        // Unbatched runs are slower: fewer operations keep the run short.
        let n = if batch > 1 { ops } else { ops / 5 };
        for destination in &options.destinations {
            let destination: &'static str = match destination.as_str() {
                "noop" => "noop",
                "https" => "https",
                _ => "http",
            };
            let job = format!("relay_{destination}_{batch}_{}", std::process::id());
            let (relay_s, records) = match destination {
                "noop" => drain(target, &job, n, batch, workers, &noop).await?,
                "https" => drain(target, &job, n, batch, workers, &https).await?,
                _ => drain(target, &job, n, batch, workers, &http).await?,
            };
            let raw_s = raw(target, &format!("{job}_raw"), n, batch, workers).await?;
            report.relay(&row(
                T::NAME,
                destination,
                (batch, workers, n),
                (relay_s, raw_s),
                &records,
            ))?;
        }
    }
    Ok(())
}

/// The same test destination over HTTPS (rustls), with a CA made for this
/// run and trusted through a CA file, as `--ca-cert` does.
async fn https_destination() -> anyhow::Result<(TestServer, HttpDestination)> {
    let ca = onceonly_http::test_ca::make();
    let server = TestServer::start_tls(Mode::Keyed, &ca.server).await?;
    let file = tempfile::NamedTempFile::new()?;
    std::fs::write(file.path(), &ca.ca_pem)?;
    let options = ClientOptions {
        request_timeout: Duration::from_secs(5),
        ca_cert: Some(file.path().to_owned()),
    };
    let https = HttpDestination::with_shape(&server.base_url(), Shape::default(), &options)?;
    Ok((server, https))
}

/// Enqueues `op-0` .. `op-{n-1}` for `job`, then refreshes the planner's
/// statistics.
async fn enqueue_all<T: BenchTarget>(target: &T, job: &str, n: usize) -> anyhow::Result<()> {
    enqueue(target.store(), job, n).await?;
    target.analyze().await
}

/// Enqueues `op-0` .. `op-{n-1}` for `job`, 5,000 to a transaction.
pub(crate) async fn enqueue<S: Store>(store: &S, job: &str, n: usize) -> anyhow::Result<()> {
    let payload = Payload::none();
    let keys: Vec<usize> = (0..n).collect();
    for chunk in keys.chunks(5_000) {
        let mut tx = store.begin().await?;
        for i in chunk {
            onceonly::ops::enqueue_in(store, &mut tx, job, &format!("op-{i}"), &payload, None)
                .await?;
        }
        S::commit(tx).await?;
    }
    Ok(())
}

/// Enqueues `n`, drains them with a relay, returns ops/s and the records.
async fn drain<T: BenchTarget, E: Effect>(
    target: &T,
    job: &str,
    n: usize,
    batch: u32,
    workers: usize,
    effect: &E,
) -> anyhow::Result<(f64, Vec<Record>)> {
    enqueue_all(target, job, n).await?;
    let store = target.store();
    let guard = Guard::new(store.clone(), JobSpec::new(job, EffectKind::Keyed))?;
    let config = RelayConfig {
        workers,
        batch,
        poll: Duration::from_millis(5),
        drain: true,
    };
    let relay = Relay::new(&guard, effect, config);
    let (_stop, stop) = tokio::sync::watch::channel(false);
    let start = Instant::now();
    relay.run(stop).await?;
    let elapsed = start.elapsed();
    let (records, completed) = job_records(store, job).await?;
    anyhow::ensure!(
        completed == n,
        "relay bench: {completed} of {n} completed ({})",
        relay.stats().summary()
    );
    Ok((n as f64 / elapsed.as_secs_f64(), records))
}

/// Every record of `job`, and how many of them are completed.
pub(crate) async fn job_records<S: Store>(
    store: &S,
    job: &str,
) -> anyhow::Result<(Vec<onceonly::Record>, usize)> {
    let list = OpList {
        job_type: Some(job),
        ..OpList::default()
    };
    let records = store.op_list(&list).await?;
    let completed = records
        .iter()
        .filter(|r| r.state == State::Completed)
        .count();
    Ok((records, completed))
}

/// The same claim and completion statements, with no guard and no effect,
/// from the same number of loops.
async fn raw<T: BenchTarget>(
    target: &T,
    job: &str,
    n: usize,
    batch: u32,
    workers: usize,
) -> anyhow::Result<f64> {
    enqueue_all(target, job, n).await?;
    let store = target.store();
    let start = Instant::now();
    let loops = (0..workers).map(|w| async move {
        let owner = format!("raw-{w}");
        loop {
            let p = OpClaimBatch {
                job_type: job,
                owner: &owner,
                lease: Duration::from_secs(30),
                limit: batch,
            };
            let claims = store.op_claim_batch(&p).await?;
            if claims.is_empty() {
                return anyhow::Ok(());
            }
            if batch > 1 {
                let items: Vec<Completion<'_>> = claims
                    .iter()
                    .map(|(r, c)| Completion {
                        op_key: &r.op_key,
                        token: c.token,
                        external_ref: None,
                        result: "null",
                    })
                    .collect();
                let done = store
                    .op_complete_batch(&OpCompleteBatch {
                        job_type: job,
                        items: &items,
                    })
                    .await?;
                anyhow::ensure!(
                    done.len() == items.len(),
                    "raw baseline completed {} of {} claims",
                    done.len(),
                    items.len()
                );
            } else {
                for (r, c) in &claims {
                    let m = Move::Complete
                        .op(job, &r.op_key, c.token)
                        .with_result("null");
                    anyhow::ensure!(
                        store.op_move(&m).await?,
                        "raw baseline did not complete {}",
                        r.op_key
                    );
                }
            }
        }
    });
    futures::future::try_join_all(loops).await?;
    Ok(n as f64 / start.elapsed().as_secs_f64())
}

fn row(
    store: &'static str,
    destination: &'static str,
    (batch, workers, ops): (u32, usize, usize),
    (relay_s, raw_s): (f64, f64),
    records: &[Record],
) -> RelayRow {
    let spans = |from: fn(&Record) -> Option<onceonly::DbTime>| {
        let mut ms: Vec<f64> = records
            .iter()
            .filter_map(|r| Some(r.completed_at?.since(from(r)?).as_secs_f64() * 1000.0))
            .collect();
        ms.sort_by(f64::total_cmp);
        let pct = |p: f64| {
            ms.get(((ms.len() as f64 * p).ceil() as usize).saturating_sub(1))
                .copied()
                .unwrap_or(0.0)
        };
        (pct(0.5), pct(0.99))
    };
    let (c50, c99) = spans(|r| r.claimed_at);
    let (e50, e99) = spans(|r| Some(r.created_at));
    RelayRow {
        store,
        destination,
        batch,
        workers,
        ops,
        ops_per_s: relay_s,
        claim_to_done_p50_ms: c50,
        claim_to_done_p99_ms: c99,
        enqueue_to_done_p50_ms: e50,
        enqueue_to_done_p99_ms: e99,
        raw_ops_per_s: raw_s,
        ratio: relay_s / raw_s,
    }
}
