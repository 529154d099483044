//! `onceonly consume sqs|nats`: consume a broker queue, each message's
//! operation guarded (docs/queues.md). The job options are `run`'s; the
//! broker's redelivery settings are read and checked before the first
//! message. Built without the broker's cargo feature, the subcommand says
//! how to get it.

use std::process::ExitCode;
use std::time::Duration;

use onceonly::{Guard, JobSpec, Store};
use onceonly_consume::{Broker, Consumer, ConsumerConfig, Guarded, KeyFrom, Redelivery};
use onceonly_http::HttpDestination;
use tokio::sync::watch;

use super::run::{shutdown_signal, JobArgs};
use crate::store::{open_migrated, with_store};

/// Arguments of `onceonly consume`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    broker: BrokerArgs,
}

#[derive(clap::Subcommand)]
enum BrokerArgs {
    /// An Amazon SQS queue (cargo feature `sqs`).
    Sqs {
        #[command(flatten)]
        queue: SqsQueue,
        #[command(flatten)]
        consumer: ConsumerArgs,
    },
    /// A NATS JetStream durable pull consumer (cargo feature `nats`).
    Nats {
        #[command(flatten)]
        queue: NatsQueue,
        #[command(flatten)]
        consumer: ConsumerArgs,
    },
}

/// Which SQS queue (shared with `check`).
#[derive(clap::Args, Clone)]
pub struct SqsQueue {
    /// The queue's URL.
    #[arg(long)]
    pub queue_url: String,
    /// The SQS endpoint, for an emulator such as moto (default: AWS's).
    #[arg(long)]
    pub sqs_endpoint: Option<String>,
    /// Where poison messages go (default: the queue's RedrivePolicy target).
    #[arg(long)]
    pub dead_letter_queue: Option<String>,
}

/// Which JetStream consumer (shared with `check`).
#[derive(clap::Args, Clone)]
pub struct NatsQueue {
    /// The NATS server.
    #[arg(long, default_value = "nats://127.0.0.1:4222")]
    pub nats: String,
    /// The stream.
    #[arg(long)]
    pub stream: String,
    /// The durable pull consumer on it.
    #[arg(long)]
    pub consumer: String,
}

#[derive(clap::Args)]
struct ConsumerArgs {
    #[command(flatten)]
    job: JobArgs,
    /// Concurrent receive loops.
    #[arg(long, default_value_t = 4)]
    workers: usize,
    /// Messages received per call by each loop (handled concurrently).
    #[arg(long, default_value_t = 1)]
    batch: usize,
    /// Where the operation key comes from: envelope (the body is
    /// {"key": ..., "payload": ...}), header:NAME (a header or message
    /// attribute; the body is the payload) or field:/json/pointer.
    #[arg(long, default_value = "envelope", value_parser = parse_key_from)]
    key_from: KeyFrom,
}

fn parse_key_from(text: &str) -> Result<KeyFrom, String> {
    text.parse()
        .map_err(|e: onceonly_consume::Error| e.to_string())
}

/// The sentence for a build without the broker's feature.
#[cfg_attr(
    all(
        feature = "sqs",
        feature = "nats",
        feature = "bench",
        feature = "console"
    ),
    allow(dead_code)
)]
pub fn not_built(feature: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "this onceonly was built without {feature} support; build it with the feature: cargo install --path crates/onceonly-cli --features {feature} (or cargo run -p onceonly-cli --features {feature} -- ...)"
    )
}

/// Consumes until SIGTERM or Ctrl-C; exits 0 after a clean stop.
pub async fn run(db: &str, args: Args) -> anyhow::Result<ExitCode> {
    match args.broker {
        BrokerArgs::Sqs { queue, consumer } => sqs(db, queue, consumer).await,
        BrokerArgs::Nats { queue, consumer } => nats(db, queue, consumer).await,
    }
}

#[cfg(feature = "sqs")]
async fn sqs(db: &str, queue: SqsQueue, args: ConsumerArgs) -> anyhow::Result<ExitCode> {
    let broker = open_sqs(&queue).await?;
    consume(db, broker, args).await
}

#[cfg(not(feature = "sqs"))]
async fn sqs(_db: &str, _queue: SqsQueue, _args: ConsumerArgs) -> anyhow::Result<ExitCode> {
    Err(not_built("sqs"))
}

#[cfg(feature = "nats")]
async fn nats(db: &str, queue: NatsQueue, args: ConsumerArgs) -> anyhow::Result<ExitCode> {
    let broker = open_nats(&queue).await?;
    consume(db, broker, args).await
}

#[cfg(not(feature = "nats"))]
async fn nats(_db: &str, _queue: NatsQueue, _args: ConsumerArgs) -> anyhow::Result<ExitCode> {
    Err(not_built("nats"))
}

/// The SQS queue, its dead-letter queue found.
#[cfg(feature = "sqs")]
pub async fn open_sqs(
    queue: &SqsQueue,
) -> anyhow::Result<onceonly_consume::brokers::sqs::SqsBroker> {
    use onceonly_consume::brokers::sqs;
    let client = sqs::client(queue.sqs_endpoint.as_deref()).await;
    Ok(sqs::SqsBroker::new(client, &queue.queue_url, queue.dead_letter_queue.as_deref()).await?)
}

/// The JetStream consumer.
#[cfg(feature = "nats")]
pub async fn open_nats(
    queue: &NatsQueue,
) -> anyhow::Result<onceonly_consume::brokers::nats::NatsBroker> {
    use onceonly_consume::brokers::nats::NatsBroker;
    Ok(NatsBroker::connect(&queue.nats, &queue.stream, &queue.consumer).await?)
}

/// The SQS queue's redelivery settings (for `check`).
pub async fn sqs_redelivery(queue: &SqsQueue) -> anyhow::Result<Redelivery> {
    #[cfg(feature = "sqs")]
    {
        use onceonly_consume::brokers::sqs;
        let client = sqs::client(queue.sqs_endpoint.as_deref()).await;
        Ok(sqs::redelivery_of(&client, &queue.queue_url).await?)
    }
    #[cfg(not(feature = "sqs"))]
    {
        let _ = queue;
        Err(not_built("sqs"))
    }
}

/// The JetStream consumer's redelivery settings (for `check`).
pub async fn nats_redelivery(queue: &NatsQueue) -> anyhow::Result<Redelivery> {
    #[cfg(feature = "nats")]
    return Ok(open_nats(queue).await?.redelivery().await?);
    #[cfg(not(feature = "nats"))]
    {
        let _ = queue;
        Err(not_built("nats"))
    }
}

#[cfg_attr(not(any(feature = "sqs", feature = "nats")), allow(dead_code))]
async fn consume<B: Broker>(db: &str, broker: B, args: ConsumerArgs) -> anyhow::Result<ExitCode> {
    // The same job settings and destination (shape, CA, headers) as `run`;
    // retention is the relay's to apply, not a consumer's.
    let (spec, destination, _retention) = args.job.spec()?;
    let config = ConsumerConfig {
        workers: args.workers.max(1),
        batch: args.batch.max(1),
        key_from: args.key_from,
    };
    let consumer = Consumer::new(broker, &spec, config).await?;
    let r = consumer.redelivery();
    eprintln!(
        "onceonly consume: {}: {} {}, {} {}; job {} timeout {}, lease {}, heartbeat {}",
        r.source,
        r.timeout_name,
        d(r.timeout),
        r.limit_name,
        r.max_deliveries
            .map_or_else(|| "unlimited".to_owned(), |n| n.to_string()),
        spec.job_type,
        d(spec.timeout),
        d(spec.lease),
        spec.heartbeat.map_or_else(|| "-".to_owned(), d),
    );
    let store = open_migrated(db).await?;
    with_store!(store, s => guarded(s, spec, &destination, &consumer).await)
}

fn d(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

async fn guarded<S: Store, B: Broker>(
    store: S,
    spec: JobSpec,
    destination: &HttpDestination,
    consumer: &Consumer<B>,
) -> anyhow::Result<ExitCode> {
    let guard = Guard::new(store, spec)?;
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::spawn(async move {
        shutdown_signal().await;
        eprintln!(
            "onceonly consume: stopping (SIGTERM or Ctrl-C): no new messages are received; those in hand finish, each within --timeout, then the summary and exit 0"
        );
        let _ = stop_tx.send(true);
    });
    let handler = Guarded {
        guard: &guard,
        effect: destination,
    };
    consumer.run(&handler, stop_rx).await?;
    eprintln!("onceonly consume: {}", consumer.summary());
    Ok(ExitCode::SUCCESS)
}
