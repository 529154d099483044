//! Messages per second through the consumer, guarded, next to the same
//! consumer acking without the guard, in the same run on the same broker.
//!
//! ```text
//! cargo run --release -p onceonly-consume --features nats --example consume_bench -- nats [URL] [MESSAGES] [WORKERS]
//! cargo run --release -p onceonly-consume --features sqs --example consume_bench -- sqs ENDPOINT [MESSAGES] [WORKERS]
//! ```
//!
//! The effect is an in-process no-op that reports done, so the numbers are
//! the broker's round trips plus, for the guarded run, the guard's claim
//! and completion on SQLite (a fresh file). Each run gets a fresh queue.
//! Latency is one message's handling (parse, guard or not, effect), without
//! the broker's receive and ack.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use onceonly::{
    Effect, EffectCtx, EffectFn, EffectKind, EffectOutcome, Guard, JobSpec, Outcome, Store,
};
use onceonly_consume::{
    envelope_body, Consumer, ConsumerConfig, Guarded, Handler, Operation, Publish,
};
use onceonly_sqlite::SqliteStore;
use tokio::sync::watch;

/// Times each handling of the inner handler.
struct Timed<H> {
    inner: H,
    took: Mutex<Vec<Duration>>,
}

impl<H: Handler> Handler for Timed<H> {
    async fn handle(&self, op: Operation) -> onceonly::Result<Outcome> {
        let started = Instant::now();
        let outcome = self.inner.handle(op).await;
        self.took.lock().unwrap().push(started.elapsed());
        outcome
    }
}

fn noop() -> EffectFn<impl Fn(EffectCtx) -> std::future::Ready<EffectOutcome> + Send + Sync> {
    EffectFn(|ctx: EffectCtx| std::future::ready(EffectOutcome::done_with_ref(ctx.op_key)))
}

/// The same no-op effect, acked without the guard.
async fn plain(op: Operation) -> onceonly::Result<Outcome> {
    let ctx = EffectCtx::detached("bench", &op.key, op.payload.value());
    let EffectOutcome::Done { external_ref, .. } = noop().perform(&ctx).await else {
        unreachable!("the no-op effect reports done");
    };
    Ok(Outcome::Done {
        result: serde_json::Value::Null,
        external_ref,
        repeat: false,
    })
}

/// Sends `n` operations, then consumes them all; returns messages/s and
/// the handling latencies.
async fn measure<B: Publish, H: Handler>(
    broker: B,
    spec: &JobSpec,
    workers: usize,
    n: usize,
    run: &str,
    handler: H,
) -> (f64, Vec<Duration>) {
    for i in 0..n {
        let body = envelope_body(&format!("{run}-{i}"), &serde_json::json!({ "n": i }));
        broker.publish(body).await.unwrap();
    }
    let config = ConsumerConfig {
        workers,
        batch: 10,
        ..ConsumerConfig::default()
    };
    let consumer = Consumer::new(broker, spec, config).await.unwrap();
    let timed = Timed {
        inner: handler,
        took: Mutex::default(),
    };
    let (stop_tx, stop_rx) = watch::channel(false);
    let started = Instant::now();
    let watch = async {
        while consumer
            .stats()
            .acked
            .load(std::sync::atomic::Ordering::Relaxed)
            < n as u64
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let elapsed = started.elapsed();
        let _ = stop_tx.send(true);
        elapsed
    };
    let (ran, elapsed) = tokio::join!(consumer.run(&timed, stop_rx), watch);
    ran.unwrap();
    let mut took = timed.took.into_inner().unwrap();
    took.sort();
    (n as f64 / elapsed.as_secs_f64(), took)
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

fn line(name: &str, (rate, took): &(f64, Vec<Duration>)) {
    println!(
        "{name:<34} {rate:>9.0} msg/s   handling p50 {:>7.2}ms  p99 {:>7.2}ms",
        pct(took, 0.5),
        pct(took, 0.99)
    );
}

async fn store() -> SqliteStore {
    let dir = tempfile::tempdir().unwrap().keep();
    let store = SqliteStore::connect(&format!("sqlite://{}", dir.join("bench.db").display()))
        .await
        .unwrap();
    store.migrate().await.unwrap();
    store
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let broker = args.first().map(String::as_str).unwrap_or("nats");
    let n: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(2000);
    let workers: usize = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(8);
    let spec = JobSpec::new("bench", EffectKind::Keyed);
    let run = format!("bench{}", std::process::id());
    let guard = Guard::new(store().await, spec.clone()).unwrap();
    let effect = noop();
    println!(
        "{broker}: {n} messages, {workers} receive loops, batch 10; SQLite store; no-op effect"
    );
    match broker {
        #[cfg(feature = "nats")]
        "nats" => {
            use onceonly_consume::brokers::nats::{self as js, NatsBroker};
            let url = args
                .get(1)
                .cloned()
                .unwrap_or_else(|| "nats://127.0.0.1:4222".into());
            let context = js::connect(&url).await.unwrap();
            let queue = |part: &str| {
                let (context, name) = (context.clone(), format!("{run}_{part}"));
                async move {
                    let subject = format!("{name}.in");
                    js::create_work_queue(&context, &name, &subject, "w", Duration::from_secs(30))
                        .await
                        .unwrap();
                    let b = NatsBroker::bind(context, &name, "w").await.unwrap();
                    b.publishing_to(subject)
                }
            };
            let unguarded = measure(
                queue("plain").await,
                &spec,
                workers,
                n,
                &format!("{run}p"),
                plain,
            )
            .await;
            let guarded = measure(
                queue("guarded").await,
                &spec,
                workers,
                n,
                &format!("{run}g"),
                Guarded {
                    guard: &guard,
                    effect: &effect,
                },
            )
            .await;
            line("JetStream, acking without guard", &unguarded);
            line("JetStream, guarded", &guarded);
            for part in ["plain", "guarded"] {
                let _ = context.delete_stream(format!("{run}_{part}")).await;
            }
        }
        #[cfg(feature = "sqs")]
        "sqs" => {
            use onceonly_consume::brokers::sqs::{self as aws, SqsBroker};
            let endpoint = args.get(1).expect("sqs ENDPOINT");
            let client = aws::client(Some(endpoint)).await;
            let queue = |part: &str| {
                let (client, name) = (client.clone(), format!("{run}-{part}"));
                async move {
                    let dead = aws::create_queue(
                        &client,
                        &format!("{name}-dead"),
                        Duration::from_secs(30),
                    )
                    .await
                    .unwrap();
                    let url = aws::create_queue(&client, &name, Duration::from_secs(30))
                        .await
                        .unwrap();
                    SqsBroker::new(client, &url, Some(&dead)).await.unwrap()
                }
            };
            let unguarded = measure(
                queue("plain").await,
                &spec,
                workers,
                n,
                &format!("{run}p"),
                plain,
            )
            .await;
            let guarded = measure(
                queue("guarded").await,
                &spec,
                workers,
                n,
                &format!("{run}g"),
                Guarded {
                    guard: &guard,
                    effect: &effect,
                },
            )
            .await;
            line("SQS (moto), acking without guard", &unguarded);
            line("SQS (moto), guarded", &guarded);
        }
        other => panic!("{other}: nats or sqs (built with its feature)"),
    }
}
