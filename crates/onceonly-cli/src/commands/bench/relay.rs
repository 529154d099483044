//! `onceonly bench --relay`: the relay draining a queue, batched and not,
//! through a no-op in-process destination and the HTTP destination on
//! loopback, next to the same claim and completion statements run alone.

use std::time::{Duration, Instant};

use onceonly::relay::{Relay, RelayConfig};
use onceonly::store::{Completion, OpClaimBatch, OpCompleteBatch, OpList, OpMove};
use onceonly::{
    Effect, EffectCtx, EffectFn, EffectKind, EffectOutcome, Guard, JobSpec, Payload, Record, State,
    Store,
};
use onceonly_http::test_server::{Mode, TestServer};
use onceonly_http::{ClientOptions, HttpDestination, Shape};
use serde::Serialize;

use super::targets::BenchTarget;

/// What `bench --relay` measures.
pub struct RelayArgs<'a> {
    /// Operations per batched measurement (a fifth of it unbatched).
    pub ops: usize,
    /// Batch sizes (1 = no batching).
    pub batches: &'a [u32],
    /// Destinations: `noop`, `http`, `https`.
    pub destinations: &'a [String],
    /// Claim loops of the relay and of the raw baseline.
    pub workers: usize,
    /// One JSON object per line.
    pub json: bool,
}

/// One measured relay line.
#[derive(Serialize)]
pub struct RelayRow {
    store: &'static str,
    destination: &'static str,
    batch: u32,
    workers: usize,
    ops: usize,
    ops_per_s: f64,
    claim_to_done_p50_ms: f64,
    claim_to_done_p99_ms: f64,
    enqueue_to_done_p50_ms: f64,
    enqueue_to_done_p99_ms: f64,
    raw_ops_per_s: f64,
    ratio: f64,
}

/// Measures the relay on `store` for each destination and batch size.
pub async fn measure<T: BenchTarget>(target: &T, args: &RelayArgs<'_>) -> anyhow::Result<()> {
    if !args.json {
        println!(
            "{:<9} {:<6} {:>5} {:>3} {:>7} {:>10} {:>9} {:>9} {:>10} {:>10} {:>10} {:>6}",
            "store",
            "dest",
            "batch",
            "wk",
            "ops",
            "relay/s",
            "c→d p50",
            "c→d p99",
            "e→d p50",
            "e→d p99",
            "raw/s",
            "ratio"
        );
    }
    let server = TestServer::start(Mode::Keyed).await?;
    let http = HttpDestination::new(&server.base_url(), Duration::from_secs(5))?;
    let (_tls_server, https) = https_destination().await?;
    let noop =
        EffectFn(|ctx: EffectCtx| async move { EffectOutcome::done_with_ref(ctx.idempotency_key) });
    let workers = args.workers.max(1);
    for &batch in args.batches {
        // Unbatched runs are slower: fewer operations keep the run short.
        let n = if batch > 1 { args.ops } else { args.ops / 5 };
        for destination in args.destinations {
            let destination: &'static str = match destination.as_str() {
                "noop" => "noop",
                "http" => "http",
                "https" => "https",
                other => anyhow::bail!("--destinations: unknown {other:?}; noop, http or https"),
            };
            let job = format!("relay_{destination}_{batch}_{}", std::process::id());
            let (relay_s, records) = match destination {
                "noop" => drain(target, &job, n, batch, workers, &noop).await?,
                "https" => drain(target, &job, n, batch, workers, &https).await?,
                _ => drain(target, &job, n, batch, workers, &http).await?,
            };
            let raw_s = raw(target, &format!("{job}_raw"), n, batch, workers).await?;
            let row = row(
                T::NAME,
                destination,
                (batch, workers, n),
                (relay_s, raw_s),
                &records,
            );
            if args.json {
                println!("{}", serde_json::to_string(&row)?);
            } else {
                println!(
                    "{:<9} {:<6} {:>5} {:>3} {:>7} {:>10.0} {:>9.1} {:>9.1} {:>10.1} {:>10.1} {:>10.0} {:>6.2}",
                    row.store, row.destination, row.batch, row.workers, row.ops, row.ops_per_s, row.claim_to_done_p50_ms,
                    row.claim_to_done_p99_ms, row.enqueue_to_done_p50_ms, row.enqueue_to_done_p99_ms,
                    row.raw_ops_per_s, row.ratio
                );
            }
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

async fn enqueue_all<T: BenchTarget>(target: &T, job: &str, n: usize) -> anyhow::Result<()> {
    let store = target.store();
    let payload = Payload::none();
    for chunk in (0..n).collect::<Vec<_>>().chunks(5_000) {
        let mut tx = store.begin().await?;
        for i in chunk {
            onceonly::ops::enqueue_in(store, &mut tx, job, &format!("op-{i}"), &payload, None)
                .await?;
        }
        <T::S as Store>::commit(tx).await?;
    }
    target.analyze().await
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
    let records = store
        .op_list(&OpList {
            job_type: Some(job),
            ..OpList::default()
        })
        .await?;
    let completed = records
        .iter()
        .filter(|r| r.state == State::Completed)
        .count();
    anyhow::ensure!(
        completed == n,
        "relay bench: {completed} of {n} completed ({})",
        relay.stats().summary()
    );
    Ok((n as f64 / elapsed.as_secs_f64(), records))
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
                    let mut m =
                        OpMove::new(job, &r.op_key, c.token, State::Claimed, State::Completed);
                    m.unless_cancel_requested = true;
                    m.result = Some("null");
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
