//! Scenario 2: the same message to several workers at once, each on its own
//! connection, once per run: one effect per run.

use std::sync::Arc;

use tokio::sync::Barrier;
use tokio::task::JoinSet;

use super::{describe, Ctx, Observed};
use crate::error::{Error, Result};
use crate::job::{Reconnect, ReplayJob};
use crate::report::Count;

/// One store per worker: the main one, then reconnections to the same database.
async fn worker_stores<S: Reconnect, J: ReplayJob<S>>(
    ctx: &Ctx<S, J>,
    workers: usize,
) -> Result<Vec<S>> {
    let mut stores = vec![ctx.store.clone()];
    for _ in 1..workers {
        stores.push(ctx.store.reconnect().await?);
    }
    Ok(stores)
}

fn tick_every(runs: usize) -> usize {
    (runs / 10).max(1)
}

pub(crate) async fn guarded<S: Reconnect, J: ReplayJob<S>>(
    ctx: &Ctx<S, J>,
    workers: usize,
) -> Result<Observed> {
    let stores = worker_stores(ctx, workers).await?;
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
            set.spawn(async move {
                barrier.wait().await;
                job.deliver(&guard, &key, &payload).await
            });
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
    let stores = worker_stores(ctx, workers).await?;
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
            set.spawn(async move {
                barrier.wait().await;
                // A naive worker's error does not stop the others.
                let _ = job.deliver_naive(&naive, &key, &payload).await;
            });
        }
        while set.join_next().await.is_some() {}
        count.add(ctx.effects(&key).await?);
        if (run + 1) % tick_every(ctx.runs) == 0 {
            ctx.tick(format!("naive run {}/{}", run + 1, ctx.runs));
        }
    }
    Ok(count)
}
