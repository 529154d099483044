//! Scenario 2 through a queue: `workers` consumer processes of the worker
//! command read the job's queue; each run's message is sent once per
//! worker, so the copies reach different processes at about the same
//! time, as a broker's duplicate deliveries do. Once the broker holds
//! nothing more, the processes stop and the effects are counted per run.

use std::time::{Duration, Instant};

use super::{Ctx, Observed};
use crate::error::{Error, Result};
use crate::job::{Consumed, Reconnect, ReplayJob};
use crate::process::{ConsumerProcess, WorkerRequest};
use crate::report::Count;

/// How long the queue may hold the same number of messages before the
/// scenario gives up on it (a hand-back waits out a lease of seconds).
const STALL: Duration = Duration::from_secs(90);

/// Readings of an empty queue in a row before it counts as empty (SQS's
/// counts are approximate).
const EMPTY_READINGS: u32 = 2;

/// What the processes did, and the operation keys they consumed.
pub(crate) struct Run {
    pub keys: Vec<String>,
    pub consumed: Vec<Consumed>,
}

impl Run {
    /// Processes that consumed at least one message.
    fn busy(&self) -> usize {
        self.consumed.iter().filter(|c| c.messages > 0).count()
    }

    fn errors(&self) -> Vec<String> {
        self.consumed
            .iter()
            .flat_map(|c| c.errors.iter().map(move |e| format!("pid {}: {e}", c.pid)))
            .collect()
    }

    /// `pid 41: 101 messages (12 found the claim in progress, 3 found it done)`.
    fn describe(&self) -> Vec<String> {
        self.consumed
            .iter()
            .map(|c| {
                format!(
                    "consumer pid {}: {} messages ({} found the claim in progress, {} found it done)",
                    c.pid, c.messages, c.in_progress, c.repeats
                )
            })
            .collect()
    }
}

/// Starts the consumer processes, sends every run's copies, waits for the
/// queue to be empty, stops the processes.
async fn run<S: Reconnect, J: ReplayJob<S>>(
    ctx: &Ctx<S, J>,
    workers: usize,
    naive: bool,
) -> Result<Run> {
    let command = ctx.worker.as_ref().ok_or_else(|| {
        Error::Worker("no worker command: give one with Harness::worker_command".into())
    })?;
    let request = WorkerRequest {
        op_key: String::new(),
        payload: serde_json::Value::Null,
        point: String::new(),
        naive,
        clock_offset_ms: ctx.store.clock_offset().millis(),
        consume: true,
    };
    let mut processes = Vec::with_capacity(workers);
    for _ in 0..workers {
        processes.push(ConsumerProcess::start(command, &request).await?);
        ctx.started_processes(1);
    }
    let side = if naive { "naive" } else { "guarded" };
    let payload = ctx.payload(1);
    let mut keys = Vec::with_capacity(ctx.runs);
    for run in 0..ctx.runs {
        let key = ctx.key(&format!("s2/w{workers}/{side}/{run}"));
        for _ in 0..workers {
            ctx.job
                .enqueue(&key, &payload, naive)
                .await
                .map_err(|e| Error::Job(format!("sending {key}: {e}")))?;
        }
        keys.push(key);
    }
    let drained = drain(ctx, naive, side).await;
    let mut consumed = Vec::with_capacity(workers);
    let mut stopped = Ok(());
    for process in processes {
        match process.stop().await {
            Ok(c) => consumed.push(c),
            Err(e) => stopped = stopped.and(Err(e)),
        }
    }
    drained?;
    stopped?;
    Ok(Run { keys, consumed })
}

/// Waits until the job's queue holds nothing, reporting progress.
async fn drain<S: Reconnect, J: ReplayJob<S>>(
    ctx: &Ctx<S, J>,
    naive: bool,
    side: &str,
) -> Result<()> {
    let mut last = u64::MAX;
    let mut since = Instant::now();
    let mut empty = 0;
    loop {
        let left = ctx
            .job
            .backlog(naive)
            .await
            .map_err(|e| Error::Job(format!("reading the queue's backlog: {e}")))?;
        if left == 0 {
            empty += 1;
            if empty >= EMPTY_READINGS {
                return Ok(());
            }
        } else {
            empty = 0;
        }
        if left != last {
            ctx.tick(format!("{side}: {left} message(s) left in the queue"));
            last = left;
            since = Instant::now();
        } else if since.elapsed() > STALL {
            return Err(Error::Job(format!(
                "the queue held {left} message(s) for {}s without change",
                STALL.as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub(crate) async fn guarded<S: Reconnect, J: ReplayJob<S>>(
    ctx: &Ctx<S, J>,
    workers: usize,
) -> Result<Observed> {
    let run = run(ctx, workers, false).await?;
    let mut obs = Observed::default();
    for key in &run.keys {
        obs.count.add(ctx.effects(key).await?);
        obs.records.add(ctx.record(key).await?.as_ref());
    }
    obs.check(
        format!("{workers} consumer processes consumed the queue and exited cleanly"),
        run.consumed.len() == workers,
        format!("{} of {workers} reported", run.consumed.len()),
    );
    obs.check(
        "two or more processes consumed messages",
        run.busy() >= 2,
        format!("{} process(es) consumed messages", run.busy()),
    );
    let errors = run.errors();
    obs.check(
        "no delivery got an error",
        errors.is_empty(),
        match errors.len() {
            0 => "none".to_owned(),
            n => format!("{n} error(s), first: {}", errors[0]),
        },
    );
    let raced: u64 = run.consumed.iter().map(|c| c.in_progress).sum();
    obs.note(format!(
        "{} run(s), each message sent {workers} times to the queue; the broker held nothing more when the processes stopped; {raced} deliveries found another process's claim in progress",
        run.keys.len()
    ));
    for line in run.describe() {
        obs.note(line);
    }
    Ok(obs)
}

pub(crate) async fn naive<S: Reconnect, J: ReplayJob<S>>(
    ctx: &Ctx<S, J>,
    workers: usize,
) -> Result<Count> {
    let run = run(ctx, workers, true).await?;
    let mut count = Count::default();
    for key in &run.keys {
        count.add(ctx.effects(key).await?);
    }
    Ok(count)
}
