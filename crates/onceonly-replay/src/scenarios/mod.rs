//! The scenario runners: each runs the guarded and the naive version of one
//! scenario and returns what it observed. None of them sees the allowed
//! count; [`crate::report::Entry::judge`] compares afterwards.

mod cancel;
mod concurrent;
mod consumers;
mod crash;
mod late_failure;
mod lease;
mod other_payload;
mod repeat;
mod similar;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use onceonly::{FaultAction, FaultHook, FaultPoint, Guard, JobSpec, Outcome, Payload, Record};

use crate::error::{Error, Result};
use crate::harness::{Progress, ProgressFn};
use crate::job::{Reconnect, ReplayJob};
use crate::naive::Naive;
use crate::process::WorkerCommand;
use crate::report::{Check, Count, Records};
use crate::scenario::Scenario;

/// Everything a scenario runner needs.
pub(crate) struct Ctx<S: Reconnect, J: ReplayJob<S>> {
    pub store: S,
    pub job: Arc<J>,
    pub spec: JobSpec,
    pub run_id: String,
    pub runs: usize,
    pub worker: Option<WorkerCommand>,
    pub progress: Option<ProgressFn>,
    /// The entry being run, for progress lines: (index, total, label).
    pub current: Mutex<(usize, usize, String)>,
    /// Reconnected stores, opened once and shared by the scenarios.
    pub others: tokio::sync::Mutex<Vec<S>>,
    /// Worker processes started in the current entry.
    pub processes: AtomicUsize,
    /// Of those, the ones killed with SIGKILL.
    pub sigkills: AtomicUsize,
}

impl<S: Reconnect, J: ReplayJob<S>> Ctx<S, J> {
    /// A fresh operation key for this run: `RUN_ID/TAIL`.
    pub fn key(&self, tail: &str) -> String {
        format!("{}/{tail}", self.run_id)
    }

    pub fn payload(&self, variant: u32) -> Payload {
        Payload::from_value(&self.job.payload(variant))
    }

    pub fn guard(&self, store: &S, owner: &str) -> Result<Guard<S>> {
        Ok(Guard::new(store.clone(), self.spec.clone())?.with_owner(format!("replay-{owner}")))
    }

    /// A guard on the main store that crashes at `point`.
    pub fn dying_guard(&self, point: FaultPoint) -> Result<Guard<S>> {
        Ok(self
            .guard(&self.store, "dying")?
            .with_fault_hook(crash_at(point)))
    }

    pub fn naive(&self, store: &S) -> Naive<S> {
        Naive::new(store.clone(), &self.spec.job_type)
    }

    pub async fn effects(&self, op_key: &str) -> Result<usize> {
        self.job
            .effects(&self.store, op_key)
            .await
            .map_err(|e| Error::Job(format!("effect probe for {op_key}: {e}")))
    }

    pub async fn live(&self, op_key: &str) -> Result<Option<usize>> {
        self.job
            .live(&self.store, op_key)
            .await
            .map_err(|e| Error::Job(format!("live probe for {op_key}: {e}")))
    }

    pub async fn record(&self, op_key: &str) -> Result<Option<Record>> {
        Ok(self
            .store
            .op_get(&self.spec.job_type, op_key)
            .await?
            .map(|snap| snap.record))
    }

    /// Moves the store's clock (shared with every reconnected store) by `by`.
    pub fn advance(&self, by: Duration) {
        self.store.clock_offset().advance(by);
    }

    /// Moves the clock past any lease taken so far.
    pub fn past_lease(&self) {
        self.advance(self.spec.lease + Duration::from_secs(1));
    }

    /// Runs the naive delivery, turning the job's error into ours.
    pub async fn deliver_naive(
        &self,
        naive: &Naive<S>,
        op_key: &str,
        payload: &Payload,
    ) -> Result<()> {
        self.job
            .deliver_naive(naive, op_key, payload)
            .await
            .map_err(|e| Error::Job(format!("naive delivery of {op_key}: {e}")))
    }

    /// One store per worker: the main one, then stores on connections of
    /// their own (opened on first use, then reused).
    pub async fn worker_stores(&self, workers: usize) -> Result<Vec<S>> {
        let mut others = self.others.lock().await;
        while others.len() + 1 < workers {
            others.push(self.store.reconnect().await?);
        }
        let mut stores = vec![self.store.clone()];
        stores.extend(others.iter().take(workers.saturating_sub(1)).cloned());
        Ok(stores)
    }

    /// True when the concurrent scenario runs consumer processes: the job
    /// reads a queue and there is a worker command to start them.
    pub fn through_processes(&self) -> bool {
        self.job.queued() && self.worker.is_some()
    }

    /// Counts `n` worker processes started in the current entry.
    pub fn started_processes(&self, n: usize) {
        self.processes.fetch_add(n, Ordering::Relaxed);
    }

    /// Counts a worker process killed with SIGKILL in the current entry.
    pub fn sigkilled(&self) {
        self.sigkills.fetch_add(1, Ordering::Relaxed);
    }

    /// The current entry's (processes, SIGKILLs), resetting both.
    pub fn take_process_counts(&self) -> (usize, usize) {
        (
            self.processes.swap(0, Ordering::Relaxed),
            self.sigkills.swap(0, Ordering::Relaxed),
        )
    }

    /// Reports progress inside the current entry.
    pub fn tick(&self, detail: String) {
        if let Some(progress) = &self.progress {
            let (done, total, label) = self.current.lock().unwrap().clone();
            progress(&Progress {
                done,
                total,
                label: &label,
                detail: Some(&detail),
            });
        }
    }
}

/// What the guarded version did in one scenario.
#[derive(Debug, Default)]
pub(crate) struct Observed {
    pub count: Count,
    pub records: Records,
    pub checks: Vec<Check>,
    pub notes: Vec<String>,
}

impl Observed {
    pub fn check(&mut self, name: impl Into<String>, passed: bool, detail: impl Into<String>) {
        self.checks.push(Check {
            name: name.into(),
            passed,
            detail: detail.into(),
        });
    }

    pub fn note(&mut self, note: impl Into<String>) {
        self.notes.push(note.into());
    }

    /// Counts one run over `keys` (their effects summed) and adds their records.
    pub async fn finish<S: Reconnect, J: ReplayJob<S>>(
        mut self,
        ctx: &Ctx<S, J>,
        keys: &[&str],
    ) -> Result<Self> {
        let mut effects = 0;
        for key in keys {
            effects += ctx.effects(key).await?;
            self.records.add(ctx.record(key).await?.as_ref());
        }
        self.count.add(effects);
        Ok(self)
    }
}

/// A guard hook that crashes at `point`.
pub(crate) fn crash_at(point: FaultPoint) -> FaultHook {
    Arc::new(move |p| {
        if p == point {
            FaultAction::Crash
        } else {
            FaultAction::Continue
        }
    })
}

/// An outcome in a few words, for notes and check details.
pub(crate) fn describe(outcome: &onceonly::Result<Outcome>) -> String {
    match outcome {
        Ok(Outcome::Done { repeat: false, .. }) => "done".into(),
        Ok(Outcome::Done { repeat: true, .. }) => "done (a repeat: stored result)".into(),
        Ok(Outcome::InProgress { age, lease, .. }) => format!(
            "in progress (claim {}ms old, lease {}ms)",
            age.as_millis(),
            lease.as_millis()
        ),
        Ok(Outcome::Held { .. }) => "held for a person".into(),
        Ok(Outcome::Failed { error }) => format!("failed: {}", error.as_deref().unwrap_or("?")),
        Ok(Outcome::Cancelled { withdrawn_ref }) => match withdrawn_ref {
            Some(r) => format!("cancelled, {r} withdrawn"),
            None => "cancelled".into(),
        },
        Ok(Outcome::RetryLater { reason }) => format!("retry later: {reason}"),
        Ok(Outcome::NotDue { .. }) => "not due".into(),
        Ok(Outcome::WithdrawFailed { error, .. }) => format!("withdraw failed: {error}"),
        Ok(other) => format!("{other:?}"),
        Err(e) => format!("error: {e}"),
    }
}

/// A record in a few words.
pub(crate) fn describe_record(record: Option<&Record>) -> String {
    match record {
        None => "no record".into(),
        Some(r) => format!("{} (token {}, attempts {})", r.state, r.token, r.attempts),
    }
}

/// Runs the guarded version of `scenario`.
pub(crate) async fn guarded<S: Reconnect, J: ReplayJob<S>>(
    ctx: &Ctx<S, J>,
    scenario: Scenario,
) -> Result<Observed> {
    match scenario {
        Scenario::Repeat => repeat::guarded(ctx).await,
        Scenario::Concurrent { workers } if ctx.through_processes() => {
            consumers::guarded(ctx, workers).await
        }
        Scenario::Concurrent { workers } => concurrent::guarded(ctx, workers).await,
        Scenario::Crash { point, death } => crash::guarded(ctx, point, death).await,
        Scenario::Lease => lease::guarded(ctx).await,
        Scenario::Similar => similar::guarded(ctx).await,
        Scenario::Cancel => cancel::guarded(ctx).await,
        Scenario::LateFailure => late_failure::guarded(ctx).await,
        Scenario::OtherPayload => other_payload::guarded(ctx).await,
    }
}

/// Runs the naive version of `scenario`.
pub(crate) async fn naive<S: Reconnect, J: ReplayJob<S>>(
    ctx: &Ctx<S, J>,
    scenario: Scenario,
) -> Result<Count> {
    match scenario {
        Scenario::Repeat => repeat::naive(ctx).await,
        Scenario::Concurrent { workers } if ctx.through_processes() => {
            consumers::naive(ctx, workers).await
        }
        Scenario::Concurrent { workers } => concurrent::naive(ctx, workers).await,
        Scenario::Crash { point, death } => crash::naive(ctx, point, death).await,
        Scenario::Lease => lease::naive(ctx).await,
        Scenario::Similar => similar::naive(ctx).await,
        Scenario::Cancel => cancel::naive(ctx).await,
        Scenario::LateFailure => late_failure::naive(ctx).await,
        Scenario::OtherPayload => other_payload::naive(ctx).await,
    }
}
