//! Scenario 2: the same message to several workers at once, each on its own
//! connection, once per run: one effect per run.

use std::sync::Arc;

use tokio::sync::Barrier;
use tokio::task::JoinSet;
use tracing::instrument::WithSubscriber;

use super::{describe, Ctx, Observed};
use crate::error::{Error, Result};
use crate::job::{Reconnect, ReplayJob};
use crate::report::Count;

fn tick_every(runs: usize) -> usize {
    (runs / 10).max(1)
}

pub(crate) async fn guarded<S: Reconnect, J: ReplayJob<S>>(
    ctx: &Ctx<S, J>,
    workers: usize,
) -> Result<Observed> {
    let stores = ctx.worker_stores(workers).await?;
    let guards = stores
        .iter()
        .enumerate()
        .map(|(i, s)| ctx.guard(s, &format!("w{i}")).map(Arc::new))
        .collect::<Result<Vec<_>>>()?;
    let payload = ctx.payload(1);
    let mut obs = Observed::default();
    let mut errors = Vec::new();
    for run in 0..ctx.runs {
        let key = ctx.key(&format!("s2/w{workers}/guarded/{run}"));
        let barrier = Arc::new(Barrier::new(workers));
        let mut set = JoinSet::new();
        for guard in &guards {
            let (guard, job, barrier) = (guard.clone(), ctx.job.clone(), barrier.clone());
            let (key, payload) = (key.clone(), payload.clone());
            let task = async move {
                barrier.wait().await;
                job.deliver(&guard, &key, &payload).await
            };
            set.spawn(task.with_current_subscriber());
        }
        while let Some(joined) = set.join_next().await {
            let outcome = joined.map_err(|e| Error::Job(format!("a worker task panicked: {e}")))?;
            if outcome.is_err() {
                errors.push(format!("run {run}: {}", describe(&outcome)));
            }
        }
        obs.count.add(ctx.effects(&key).await?);
        obs.records.add(ctx.record(&key).await?.as_ref());
        if (run + 1) % tick_every(ctx.runs) == 0 {
            ctx.tick(format!("guarded run {}/{}", run + 1, ctx.runs));
        }
    }
    obs.check(
        "no worker got an error",
        errors.is_empty(),
        match errors.len() {
            0 => "none".to_owned(),
            n => format!("{n} error(s), first: {}", errors[0]),
        },
    );
    Ok(obs)
}

pub(crate) async fn naive<S: Reconnect, J: ReplayJob<S>>(
    ctx: &Ctx<S, J>,
    workers: usize,
) -> Result<Count> {
    let stores = ctx.worker_stores(workers).await?;
    let naives: Vec<_> = stores.iter().map(|s| Arc::new(ctx.naive(s))).collect();
    let payload = ctx.payload(1);
    let mut count = Count::default();
    for run in 0..ctx.runs {
        let key = ctx.key(&format!("s2/w{workers}/naive/{run}"));
        let barrier = Arc::new(Barrier::new(workers));
        let mut set = JoinSet::new();
        for naive in &naives {
            let (naive, job, barrier) = (naive.clone(), ctx.job.clone(), barrier.clone());
            let (key, payload) = (key.clone(), payload.clone());
            let task = async move {
                barrier.wait().await;
                // A naive worker's error does not stop the others.
                let _ = job.deliver_naive(&naive, &key, &payload).await;
            };
            set.spawn(task.with_current_subscriber());
        }
        while set.join_next().await.is_some() {}
        count.add(ctx.effects(&key).await?);
        if (run + 1) % tick_every(ctx.runs) == 0 {
            ctx.tick(format!("naive run {}/{}", run + 1, ctx.runs));
        }
    }
    Ok(count)
}
