//! `onceonly replay --queue sqs|nats`: the same scenarios with every
//! delivery sent through the broker and handled by the guarded consumer
//! (onceonly_consume::replay). Each demo job gets queues of its own, named
//! after the run, created before its scenarios and deleted after them.
//! The job timeout is set to 2s and the broker's redelivery timeout to 3s,
//! so a dead worker's message comes back within seconds.

use onceonly::Store;
use onceonly_replay::demo::{DemoConn, DemoJob};
use onceonly_replay::{Harness, ProgressFn, Reconnect, ReplayJob, Report, WorkerCommand};

/// The job timeout the broker scenarios run with.
#[cfg(any(feature = "sqs", feature = "nats"))]
pub const JOB_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// The broker's redelivery timeout (ack_wait, VisibilityTimeout) they use.
#[cfg(any(feature = "sqs", feature = "nats"))]
pub const REDELIVERY: std::time::Duration = std::time::Duration::from_secs(3);

/// Workers of the concurrent scenario through a broker: two consumer
/// processes (`onceonly replay-worker`, consuming the queue) racing for
/// each operation's two copies. (Eight, as without a broker, would take
/// minutes on an emulated SQS for no new evidence.)
pub const QUEUE_WORKERS: [usize; 1] = [2];

/// Which broker the replay goes through.
#[derive(clap::Args, Clone, Debug)]
pub struct QueueArgs {
    /// Send every delivery through this broker: sqs (with --sqs-endpoint)
    /// or nats (with --nats). The binary needs the broker's cargo feature.
    #[arg(long, value_parser = ["sqs", "nats"])]
    pub queue: Option<String>,
    /// The SQS endpoint (such as moto's http://127.0.0.1:PORT).
    #[arg(long, value_name = "URL")]
    pub sqs_endpoint: Option<String>,
    /// The NATS server.
    #[arg(long, value_name = "URL", default_value = "nats://127.0.0.1:4222")]
    pub nats: String,
}

impl QueueArgs {
    /// The same options, for a replay worker process, with the queues' prefix.
    pub fn worker_args(&self, prefix: &str) -> Vec<String> {
        let mut args = Vec::new();
        if let Some(queue) = &self.queue {
            args.extend([
                "--queue".into(),
                queue.clone(),
                "--nats".into(),
                self.nats.clone(),
            ]);
            if let Some(url) = &self.sqs_endpoint {
                args.extend(["--sqs-endpoint".into(), url.clone()]);
            }
            args.extend(["--queue-prefix".into(), prefix.to_owned()]);
        }
        args
    }

    /// Refuses what cannot run before anything starts.
    pub fn validate(&self) -> anyhow::Result<()> {
        match self.queue.as_deref() {
            Some("sqs") if self.sqs_endpoint.is_none() => anyhow::bail!(
                "--queue sqs needs --sqs-endpoint URL (the SQS endpoint, such as moto's)"
            ),
            #[cfg(not(feature = "sqs"))]
            Some("sqs") => Err(super::consume::not_built("sqs")),
            #[cfg(not(feature = "nats"))]
            Some("nats") => Err(super::consume::not_built("nats")),
            _ => Ok(()),
        }
    }
}

/// Queue names from a run's job type: letters, digits and `_` only.
pub fn prefix(job_type: &str) -> String {
    job_type
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// The demo job's spec as the broker scenarios run it.
#[cfg(any(feature = "sqs", feature = "nats"))]
fn spec(job: &DemoJob) -> onceonly::JobSpec {
    job.spec().clone().timeout(JOB_TIMEOUT)
}

/// What a harness needs besides the job.
pub struct Parts<S> {
    /// The migrated store.
    pub store: S,
    /// The worker command (its queue options appended here).
    pub command: WorkerCommand,
    /// Concurrent runs.
    pub runs: usize,
    /// The run id.
    pub run_id: String,
    /// The progress printer.
    pub progress: ProgressFn,
    /// Worker counts of the concurrent scenario (None: the harness's).
    pub workers: Option<Vec<usize>>,
}

impl<S: Reconnect> Parts<S> {
    async fn run<J: ReplayJob<S>>(self, job: J) -> anyhow::Result<Report> {
        let harness = Harness::new(self.store, job)
            .runs(self.runs)
            .run_id(&self.run_id)
            .worker_command(self.command)
            .on_progress(self.progress);
        let harness = match &self.workers {
            Some(w) => harness.workers(w),
            None => harness,
        };
        Ok(harness.run().await?)
    }
}

/// Runs the scenarios on `job`, through the broker when one is given.
pub async fn run<S>(queue: &QueueArgs, job: DemoJob, mut parts: Parts<S>) -> anyhow::Result<Report>
where
    S: Reconnect,
    S::Conn: DemoConn,
{
    let prefix = prefix(&job.spec().job_type);
    if queue.queue.is_some() {
        parts.workers = Some(QUEUE_WORKERS.to_vec());
    }
    for arg in queue.worker_args(&prefix) {
        parts.command = parts.command.arg(arg);
    }
    match queue.queue.as_deref() {
        None => parts.run(job).await,
        #[cfg(feature = "nats")]
        Some("nats") => {
            let wrapped = nats::job::<S>(&queue.nats, &prefix, job).await?;
            let report = parts.run(wrapped).await;
            nats::delete(&queue.nats, &prefix).await;
            report
        }
        #[cfg(feature = "sqs")]
        Some("sqs") => {
            let endpoint = queue.sqs_endpoint.as_deref().unwrap_or_default();
            let wrapped = sqs::job::<S>(endpoint, &prefix, job).await?;
            let report = parts.run(wrapped).await;
            sqs::delete(endpoint, &prefix).await;
            report
        }
        Some(other) => {
            queue.validate()?;
            anyhow::bail!("--queue {other}: one of sqs, nats")
        }
    }
}

/// One replay worker process's delivery, through the broker when one is given.
pub async fn serve<S: Store>(
    queue: &QueueArgs,
    prefix: Option<&str>,
    job: DemoJob,
    store: S,
    request: &onceonly_replay::WorkerRequest,
) -> anyhow::Result<()>
where
    S::Conn: DemoConn,
{
    use onceonly_replay::worker;
    let prefix = prefix.unwrap_or_default();
    match queue.queue.as_deref() {
        None => Ok(worker::serve(&job, store, request).await?),
        #[cfg(feature = "nats")]
        Some("nats") => {
            let wrapped = nats::job::<S>(&queue.nats, prefix, job).await?;
            Ok(worker::serve(&wrapped, store, request).await?)
        }
        #[cfg(feature = "sqs")]
        Some("sqs") => {
            let endpoint = queue.sqs_endpoint.as_deref().unwrap_or_default();
            let wrapped = sqs::job::<S>(endpoint, prefix, job).await?;
            Ok(worker::serve(&wrapped, store, request).await?)
        }
        Some(_) => {
            queue.validate()?;
            let _ = (prefix, store);
            anyhow::bail!("--queue: one of sqs, nats")
        }
    }
}

#[cfg(feature = "nats")]
mod nats {
    use super::*;
    use onceonly_consume::brokers::nats::{self as js, NatsBroker};
    use onceonly_consume::replay::BrokerJob;

    fn names(prefix: &str, part: &str) -> (String, String) {
        (
            format!("{prefix}_{part}"),
            format!("onceonly.replay.{prefix}.{part}"),
        )
    }

    /// The demo job through two JetStream work queues (guarded, naive),
    /// created if missing.
    pub async fn job<S: Store>(
        url: &str,
        prefix: &str,
        job: DemoJob,
    ) -> anyhow::Result<BrokerJob<DemoJob, NatsBroker>>
    where
        S::Conn: DemoConn,
    {
        let context = js::connect(url).await?;
        let mut brokers = Vec::new();
        for part in ["guarded", "naive"] {
            let (stream, subject) = names(prefix, part);
            js::create_work_queue(&context, &stream, &subject, "worker", REDELIVERY).await?;
            let broker = NatsBroker::bind(context.clone(), &stream, "worker").await?;
            brokers.push(broker.publishing_to(subject));
        }
        let naive = brokers.pop().expect("two brokers");
        let guarded = brokers.pop().expect("two brokers");
        let spec = spec(&job);
        Ok(BrokerJob::new::<S>(job, spec, guarded, naive).await?)
    }

    /// Deletes the run's streams (best effort: a leftover stream is only space).
    pub async fn delete(url: &str, prefix: &str) {
        if let Ok(context) = js::connect(url).await {
            for part in ["guarded", "naive"] {
                let _ = context.delete_stream(names(prefix, part).0).await;
            }
        }
    }
}

#[cfg(feature = "sqs")]
mod sqs {
    use super::*;
    use onceonly_consume::brokers::sqs::{self as aws, SqsBroker};
    use onceonly_consume::replay::BrokerJob;

    /// The demo job through two SQS queues (guarded, naive) and a
    /// dead-letter queue, created if missing.
    pub async fn job<S: Store>(
        endpoint: &str,
        prefix: &str,
        job: DemoJob,
    ) -> anyhow::Result<BrokerJob<DemoJob, SqsBroker>>
    where
        S::Conn: DemoConn,
    {
        let client = aws::client(Some(endpoint)).await;
        let dead = aws::create_queue(&client, &format!("{prefix}-dead"), REDELIVERY).await?;
        let mut brokers = Vec::new();
        for part in ["guarded", "naive"] {
            let url = aws::create_queue(&client, &format!("{prefix}-{part}"), REDELIVERY).await?;
            brokers.push(SqsBroker::new(client.clone(), &url, Some(&dead)).await?);
        }
        let naive = brokers.pop().expect("two brokers");
        let guarded = brokers.pop().expect("two brokers");
        let spec = spec(&job);
        Ok(BrokerJob::new::<S>(job, spec, guarded, naive).await?)
    }

    /// Deletes the run's queues (best effort).
    pub async fn delete(endpoint: &str, prefix: &str) {
        let client = aws::client(Some(endpoint)).await;
        for part in ["guarded", "naive", "dead"] {
            if let Ok(out) = client
                .get_queue_url()
                .queue_name(format!("{prefix}-{part}"))
                .send()
                .await
            {
                if let Some(url) = out.queue_url() {
                    let _ = client.delete_queue().queue_url(url).send().await;
                }
            }
        }
    }
}
