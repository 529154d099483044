//! `onceonly replay`: the scenarios of docs/DESIGN.md section 5 on built-in demo
//! jobs, one per effect kind, naive next to guarded.
//!
//! Every run writes under job types of its own, `replay-<run id>.<demo>`
//! (naive markers under `....naive`), so runs never meet each other's
//! records, whatever the database. When the report is printed, the run's
//! records and demo rows are removed (held ones are resolved as cancelled
//! first); `--keep` leaves them for `onceonly inspect --job replay-<run id>.<demo>`.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use onceonly::ops::{self, Resolution};
use onceonly::store::{OpList, OpPurge};
use onceonly::{State, Store};
use onceonly_replay::demo::{DemoConn, DemoJob, DemoKind, DEMO_KEY};
use onceonly_replay::process::REQUEST_ENV;
use onceonly_replay::{
    note, Harness, Progress, Reconnect, Report, WorkerCommand, WorkerRequest, DEFAULT_RUNS,
};
use tracing::instrument::WithSubscriber;

use super::replay_queue::{self, Parts, QueueArgs};
use crate::store::{open, open_migrated, with_store};

/// Arguments of `onceonly replay`.
#[derive(clap::Args)]
pub struct Args {
    /// Also write the whole report as JSON to FILE (one entry per scenario
    /// and kind: allowed, naive and guarded counts, records, runs, pass).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Runs of the concurrent scenario, for 2 and for 8 workers.
    #[arg(long, default_value_t = DEFAULT_RUNS as u64, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    runs: u64,
    /// Print the one-page note of each demo job (what "once" means for it)
    /// and exit, running nothing.
    #[arg(long)]
    note: bool,
    /// Keep this run's records and demo rows instead of removing them.
    #[arg(long)]
    keep: bool,
    #[command(flatten)]
    queue: QueueArgs,
}

/// Arguments of the hidden `onceonly replay-worker`: one worker process of a
/// demo job, which the harness kills with SIGKILL at a named point.
#[derive(clap::Args)]
pub struct WorkerArgs {
    /// The demo job: local, keyed, lookup, opaque-hold, opaque-at-least-once, opaque-at-most-once.
    #[arg(long)]
    demo: String,
    /// Its job type.
    #[arg(long)]
    job_type: String,
    /// Its destination's base URL (all but local).
    #[arg(long)]
    http: Option<String>,
    /// The request JSON (set by the harness).
    #[arg(long, env = REQUEST_ENV, hide_env_values = true)]
    request: String,
    #[command(flatten)]
    queue: QueueArgs,
    /// The run's queue names (with --queue).
    #[arg(long)]
    queue_prefix: Option<String>,
}

/// Runs `onceonly replay`: exits 1 when a guarded result breaks its allowed count.
pub async fn run(db: &str, args: Args) -> anyhow::Result<ExitCode> {
    if args.note {
        for kind in DemoKind::ALL {
            println!(
                "{}",
                note(&kind.spec(&format!("replay.{}", kind.name())), DEMO_KEY)
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    args.queue.validate()?;
    let started = Instant::now();
    let store = open_migrated(db).await?;
    let runs = usize::try_from(args.runs)?;
    let queue = args.queue.clone();
    let (report, run_id) =
        quietly(
            async move { with_store!(store, s => suite(s, db, runs, args.keep, &queue).await) },
        )
        .await?;
    let elapsed = started.elapsed();
    print!("{}", report.table());
    println!(
        "{}; {}, {:.1}s, run {run_id}",
        summary_line(&report),
        onceonly::db_url::redact(db),
        elapsed.as_secs_f64()
    );
    if let Some(path) = &args.json {
        let doc = serde_json::json!({
            "db": onceonly::db_url::redact(db),
            "queue": args.queue.queue,
            "run_id": run_id,
            "runs": runs,
            "elapsed_ms": elapsed.as_millis() as u64,
            "pass": report.passed(),
            "summary": report.summary(),
            "entries": report.entries,
        });
        std::fs::write(path, serde_json::to_string_pretty(&doc)? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(if report.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Runs `work` with only errors logged, unless ONCEONLY_LOG says otherwise:
/// the scenarios make the guard warn on purpose (stale claims, withdrawals),
/// and those warnings would bury the progress line.
async fn quietly<T>(work: impl std::future::Future<Output = T>) -> T {
    if std::env::var_os("ONCEONLY_LOG").is_some() {
        return work.await;
    }
    let errors_only = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("error"))
        .with_writer(std::io::stderr)
        .finish();
    work.with_subscriber(errors_only).await
}

fn summary_line(report: &Report) -> String {
    let s = report.summary();
    let verdict = if report.passed() {
        "PASS: every guarded count within what its policy allows"
    } else {
        "FAIL: a guarded count broke what its policy allows"
    };
    format!(
        "{verdict} ({} pass, {} fail, {} n/a, {} skipped; {} worker processes, {} killed by SIGKILL)",
        s.pass, s.fail, s.not_applicable, s.skipped, s.processes, s.sigkills
    )
}

/// A run id unlikely to repeat: seconds since the epoch and pid, in hex.
fn new_run_id() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format!("replay-{secs:x}{:x}", std::process::id() & 0xfff)
}

/// The progress line on stderr: rewritten in place on a terminal, one line
/// per scenario otherwise.
fn progress_printer(offset: usize, total: usize) -> Arc<dyn Fn(&Progress<'_>) + Send + Sync> {
    let tty = std::io::stderr().is_terminal();
    Arc::new(move |p: &Progress<'_>| {
        let at = offset + p.done + 1;
        let mut err = std::io::stderr().lock();
        if tty {
            let detail = p.detail.map(|d| format!(" ({d})")).unwrap_or_default();
            let _ = write!(err, "\r\x1b[2K[{at:>3}/{total}] {}{detail}", p.label);
        } else if p.detail.is_none() {
            let _ = writeln!(err, "[{at:>3}/{total}] {}", p.label);
        }
        let _ = err.flush();
    })
}

/// Runs every demo job's scenarios on `store`; returns the merged report.
async fn suite<S>(
    store: S,
    db: &str,
    runs: usize,
    keep: bool,
    queue: &QueueArgs,
) -> anyhow::Result<(Report, String)>
where
    S: Reconnect,
    S::Conn: DemoConn,
{
    let run_id = new_run_id();
    let exe = std::env::current_exe().context("finding this executable to start replay workers")?;
    let mut report = Report::default();
    let mut job_types = Vec::new();
    let mut offset = 0;
    for kind in DemoKind::ALL {
        let job_type = format!("{run_id}.{}", kind.name());
        let job = DemoJob::start(kind, &job_type).await?;
        job.prepare(&store).await?;
        let mut command = WorkerCommand::new(&exe)
            .arg("--db")
            .arg(db)
            .arg("replay-worker")
            .arg("--demo")
            .arg(kind.name())
            .arg("--job-type")
            .arg(&job_type);
        if let Some(url) = job.base_url() {
            command = command.arg("--http").arg(url);
        }
        let mut planner = Harness::new(
            store.clone(),
            DemoJob::attach(kind, &job_type, job.base_url().as_deref())?,
        );
        if queue.queue.is_some() {
            planner = planner.workers(&replay_queue::QUEUE_WORKERS);
        }
        let planned = planner.plan().entries.len();
        let parts = Parts {
            store: store.clone(),
            command,
            runs,
            run_id: run_id.clone(),
            progress: progress_printer(offset, planned * DemoKind::ALL.len()),
            workers: None,
        };
        let part = replay_queue::run(queue, job, parts).await?;
        offset += planned;
        if !keep {
            DemoJob::attach(kind, &job_type, Some("http://127.0.0.1:9"))?
                .clear(&store)
                .await?;
        }
        report.merge(part);
        job_types.push(job_type);
    }
    if std::io::stderr().is_terminal() {
        eprint!("\r\x1b[2K");
    }
    if !keep {
        clean_up(&store, &job_types).await?;
    }
    Ok((report, run_id))
}

/// Removes the run's records: held ones are resolved as cancelled, then
/// every finished one is purged.
async fn clean_up<S: Store>(store: &S, job_types: &[String]) -> anyhow::Result<()> {
    for job_type in job_types
        .iter()
        .flat_map(|t| [t.clone(), format!("{t}.naive")])
    {
        let held = OpList {
            job_type: Some(&job_type),
            state: Some(State::Held),
            ..OpList::default()
        };
        for r in store.op_list(&held).await? {
            let why = "the replay run that made it has finished";
            ops::resolve(
                store,
                &job_type,
                &r.op_key,
                &Resolution::Cancelled,
                why,
                Some(r.token),
            )
            .await?;
        }
        let purge = OpPurge {
            job_type: Some(&job_type),
            older_than: std::time::Duration::ZERO,
        };
        store.op_purge(&purge).await?;
    }
    Ok(())
}

/// Runs one replay worker process: delivers as asked and waits at the point
/// to be killed. Returning at all means the point was never reached.
pub async fn worker(db: &str, args: WorkerArgs) -> anyhow::Result<ExitCode> {
    let request = WorkerRequest::from_json(&args.request)?;
    let kind = DemoKind::parse(&args.demo)?;
    let job = DemoJob::attach(kind, &args.job_type, args.http.as_deref())?;
    let store = open(db).await?;
    let prefix = args.queue_prefix.as_deref();
    let err = with_store!(store, s => replay_queue::serve(&args.queue, prefix, job, s, &request).await.err());
    match err {
        Some(e) => Err(e),
        // A consumer process has stopped and reported.
        None if request.consume => Ok(ExitCode::SUCCESS),
        // A killed worker never returns: the point was not reached.
        None => Ok(ExitCode::FAILURE),
    }
}
