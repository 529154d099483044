//! The harness: plans every scenario with its allowed count, then runs the
//! naive and the guarded version of each, one scenario at a time.

use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use tokio::runtime::{Handle, RuntimeFlavor};

use crate::allowed::allowed;
use crate::error::{Error, Result};
use crate::job::{Reconnect, ReplayJob};
use crate::process::WorkerCommand;
use crate::report::{Entry, Report};
use crate::scenario::{Death, Scenario};
use crate::scenarios::{self, Ctx};

/// The default number of concurrent runs per worker count.
pub const DEFAULT_RUNS: usize = 100;

/// The default worker counts of the concurrent scenario.
pub const DEFAULT_WORKERS: [usize; 2] = [2, 8];

/// Where the harness is.
#[derive(Debug, Clone, Copy)]
pub struct Progress<'a> {
    /// Entries finished before this one.
    pub done: usize,
    /// Entries in the plan.
    pub total: usize,
    /// The entry being run: `kind · 3 dies after claim (SIGKILL)`.
    pub label: &'a str,
    /// Where inside the entry, when it takes a while.
    pub detail: Option<&'a str>,
}

/// A progress callback.
pub type ProgressFn = Arc<dyn Fn(&Progress<'_>) + Send + Sync>;

/// Runs docs/DESIGN.md section 5's scenarios on one job.
pub struct Harness<S: Reconnect, J: ReplayJob<S>> {
    store: S,
    job: Arc<J>,
    runs: usize,
    workers: Vec<usize>,
    worker: Option<WorkerCommand>,
    progress: Option<ProgressFn>,
    run_id: String,
}

/// A run id unlikely to repeat: milliseconds and pid, in hex.
fn new_run_id() -> String {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    format!("replay-{:x}-{:x}", ms, std::process::id())
}

impl<S: Reconnect, J: ReplayJob<S>> Harness<S, J> {
    /// A harness for `job` on `store` (migrated), with [`DEFAULT_RUNS`]
    /// concurrent runs for each of [`DEFAULT_WORKERS`], and no worker
    /// command (the SIGKILL scenarios are then skipped, and say so).
    pub fn new(store: S, job: J) -> Self {
        Self {
            store,
            job: Arc::new(job),
            runs: DEFAULT_RUNS,
            workers: DEFAULT_WORKERS.to_vec(),
            worker: None,
            progress: None,
            run_id: new_run_id(),
        }
    }

    /// Sets the number of runs of the concurrent scenario (at least 1).
    pub fn runs(mut self, runs: usize) -> Self {
        self.runs = runs.max(1);
        self
    }

    /// Sets the worker counts of the concurrent scenario (each at least 2).
    pub fn workers(mut self, workers: &[usize]) -> Self {
        self.workers = workers.iter().map(|w| (*w).max(2)).collect();
        self
    }

    /// The command that starts one worker process of this job for the
    /// SIGKILL scenarios. The harness sets the request in the environment
    /// ([`crate::process::REQUEST_ENV`]); the process must read it
    /// ([`crate::WorkerRequest::from_env`]) and call [`crate::worker::serve`]
    /// with the same job on the same database.
    pub fn worker_command(mut self, command: WorkerCommand) -> Self {
        self.worker = Some(command);
        self
    }

    /// Calls `progress` as each entry starts, and during long ones.
    pub fn on_progress(mut self, progress: ProgressFn) -> Self {
        self.progress = Some(progress);
        self
    }

    /// Sets the run id that prefixes every operation key (default: a new one).
    pub fn run_id(mut self, run_id: impl Into<String>) -> Self {
        self.run_id = run_id.into();
        self
    }

    /// The job.
    pub fn job(&self) -> &J {
        &self.job
    }

    /// Every entry with its allowed count, derived from the job's effect
    /// kind and policy alone; nothing runs.
    pub fn plan(&self) -> Report {
        let spec = self.job.spec();
        let entries = Scenario::all(&self.workers)
            .into_iter()
            .map(|s| {
                let runs = match s {
                    Scenario::Concurrent { .. } => self.runs,
                    _ => 1,
                };
                Entry::planned(
                    s,
                    spec.effect.to_string(),
                    spec.job_type.clone(),
                    runs,
                    allowed(spec.effect, s),
                )
            })
            .collect();
        Report {
            run_id: self.run_id.clone(),
            entries,
        }
    }

    /// Plans, then runs every scenario, naive first, then guarded, and
    /// judges each against the count planned for it.
    ///
    /// A misbehaving job makes failed entries, not an error. Returns an
    /// error when the spec is invalid or the runtime is not multi-threaded.
    pub async fn run(&self) -> Result<Report> {
        if Handle::current().runtime_flavor() != RuntimeFlavor::MultiThread {
            return Err(Error::Runtime);
        }
        let spec = self.job.spec();
        spec.validate()?;
        let mut report = self.plan();
        let ctx = Ctx {
            store: self.store.clone(),
            job: self.job.clone(),
            spec,
            run_id: self.run_id.clone(),
            runs: self.runs,
            worker: self.worker.clone(),
            progress: self.progress.clone(),
            current: Mutex::new((0, 0, String::new())),
            others: tokio::sync::Mutex::new(Vec::new()),
            processes: Default::default(),
            sigkills: Default::default(),
        };
        let total = report.entries.len();
        for (i, entry) in report.entries.iter_mut().enumerate() {
            let label = format!("{} · {}", entry.kind, entry.label());
            *ctx.current.lock().unwrap() = (i, total, label.clone());
            if let Some(progress) = &self.progress {
                progress(&Progress {
                    done: i,
                    total,
                    label: &label,
                    detail: None,
                });
            }
            run_entry(&ctx, entry).await;
        }
        Ok(report)
    }
}

async fn run_entry<S: Reconnect, J: ReplayJob<S>>(ctx: &Ctx<S, J>, entry: &mut Entry) {
    let scenario = entry.scenario();
    let started = Instant::now();
    if entry.allowed.not_applicable.is_none() {
        let needs_worker = matches!(
            scenario,
            Scenario::Crash {
                death: Death::Sigkill,
                ..
            }
        );
        if needs_worker && ctx.worker.is_none() {
            entry.skipped = Some(
                "no worker process to kill: give the harness a worker command (Harness::worker_command)"
                    .into(),
            );
        } else {
            match scenarios::naive(ctx, scenario).await {
                Ok(count) => entry.naive = Some(count),
                Err(e) => entry
                    .notes
                    .push(format!("the naive version could not finish: {e}")),
            }
            match scenarios::guarded(ctx, scenario).await {
                Ok(obs) => {
                    entry.guarded = Some(obs.count);
                    entry.records = obs.records;
                    entry.checks = obs.checks;
                    entry.notes.extend(obs.notes);
                }
                Err(e) => entry.error = Some(e.to_string()),
            }
        }
    }
    (entry.processes, entry.sigkills) = ctx.take_process_counts();
    entry.elapsed_ms = started.elapsed().as_millis() as u64;
    entry.judge();
}
