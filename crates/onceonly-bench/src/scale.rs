//! Scale-out: N real relay processes (`onceonly run --drain`) drain one
//! queue on one PostgreSQL database into an HTTP destination on loopback
//! that does not deduplicate: every POST it receives is counted by key. The
//! rate runs from the first claim to the last completion (the database's
//! clock); one process on the same queue size, in the same run, is the
//! baseline.
//!
//! The processes relay an opaque effect that is held, never resent, when
//! its outcome is unknown: the protocol allows no operation to reach the
//! destination twice, so any key counted twice is a fault, and the run
//! fails after printing its row.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::Context;
use onceonly::Store;
use onceonly_http::test_server::{Mode, TestServer};
use onceonly_postgres::{PgOptions, PgStore};
use serde::Serialize;
use sqlx::{Connection, Executor, PgConnection};

use crate::relay::{enqueue, job_records};
use crate::{Config, Report, StoreKind};

/// What [`scale_out`] measures beyond [`Config`] (which gives the
/// operations of a batched measurement; an unbatched one runs a fifth).
#[derive(Debug, Clone)]
pub struct ScaleOptions {
    /// The `onceonly` binary whose `run` command the relay processes are.
    pub program: PathBuf,
    /// Relay processes per measurement; 1 is measured first in any case,
    /// as the baseline.
    pub processes: Vec<usize>,
    /// Rows each claim loop claims per statement (1 = no batching).
    pub batches: Vec<u32>,
    /// Claim loops in each process.
    pub workers: usize,
}

/// One measured scale-out line.
#[derive(Debug, Clone, Serialize)]
pub struct ScaleRow {
    /// Always `postgres`.
    pub store: &'static str,
    /// Relay processes.
    pub processes: usize,
    /// Rows claimed per statement.
    pub batch: u32,
    /// Claim loops per process.
    pub workers: usize,
    /// Operations enqueued, all before the processes start.
    pub ops: usize,
    /// Operations per second, first claim to last completion.
    pub ops_per_s: f64,
    /// Seconds from starting the processes to the last one's exit.
    pub wall_s: f64,
    /// POST requests the destination received.
    pub posts: u64,
    /// Distinct operations that reached the destination.
    pub keys_received: usize,
    /// Operations that reached it more than once (0 when correct).
    pub keys_sent_twice: usize,
    /// Operations that never reached it (0 when correct).
    pub keys_missing: usize,
    /// One process, the same batch and queue size, in this run.
    pub baseline_ops_per_s: f64,
    /// This rate over the baseline.
    pub ratio: f64,
}

/// Measures N relay processes on PostgreSQL for each N and batch size of
/// `options`, in a database made for the run and dropped afterwards.
/// Fails after reporting a row whose destination saw an operation twice or
/// missed one.
pub async fn scale_out(
    config: &Config,
    options: &ScaleOptions,
    report: &mut dyn Report,
) -> anyhow::Result<()> {
    if !config.stores.contains(&StoreKind::Postgres) {
        anyhow::bail!("scale-out runs on PostgreSQL only, and postgres is not among the stores");
    }
    if config.stores.contains(&StoreKind::Sqlite) {
        report.note("scale-out runs on PostgreSQL only: sqlite skipped");
    }
    let db = match ScratchDb::create(&config.pg.url).await {
        Ok(db) => db,
        Err(e) => {
            report.note(&format!("PostgreSQL skipped: {e:#}"));
            return Ok(());
        }
    };
    let measured = measure_all(&db.url, config.ops, options, report).await;
    if let Err(e) = db.drop().await {
        report.note(&format!("{e:#}"));
    }
    measured
}

async fn measure_all(
    url: &str,
    ops: usize,
    options: &ScaleOptions,
    report: &mut dyn Report,
) -> anyhow::Result<()> {
    let store = PgStore::connect_with(url, PgOptions::default().max_connections(4)).await?;
    let measured = measure_each(&store, url, ops, options, report).await;
    // Closed before the database is dropped under it.
    store.pool().close().await;
    measured
}

async fn measure_each(
    store: &PgStore,
    url: &str,
    ops: usize,
    options: &ScaleOptions,
    report: &mut dyn Report,
) -> anyhow::Result<()> {
    store.migrate().await?;
    let mut processes = vec![1];
    let mut more: Vec<usize> = options
        .processes
        .iter()
        .copied()
        .filter(|&p| p > 1)
        .collect();
    more.sort_unstable();
    more.dedup();
    processes.extend(more);
    let workers = options.workers.max(1);
    for &batch in &options.batches {
        // Unbatched runs are slower: fewer operations keep the run short.
        let n = if batch > 1 { ops } else { ops / 5 };
        let mut baseline = None;
        for &p in &processes {
            let job = format!("scale_{p}_{batch}");
            enqueue(store, &job, n).await?;
            sqlx::query("ANALYZE onceonly.ops")
                .execute(store.pool())
                .await?;
            let run = Run {
                program: &options.program,
                url,
                job: &job,
                processes: p,
                batch,
                workers,
            };
            let measured = run.measure(store, n).await?;
            let baseline_ops_per_s = *baseline.get_or_insert(measured.ops_per_s);
            let row = ScaleRow {
                store: StoreKind::Postgres.name(),
                processes: p,
                batch,
                workers,
                ops: n,
                ops_per_s: measured.ops_per_s,
                wall_s: measured.wall.as_secs_f64(),
                posts: measured.posts,
                keys_received: measured.keys_received,
                keys_sent_twice: measured.keys_sent_twice,
                keys_missing: n.saturating_sub(measured.keys_received),
                baseline_ops_per_s,
                ratio: measured.ops_per_s / baseline_ops_per_s,
            };
            report.scale(&row)?;
            anyhow::ensure!(
                row.keys_sent_twice == 0 && row.keys_missing == 0 && row.posts == n as u64,
                "{p} relay processes, batch {batch}: {} operations reached the destination \
                 more than once, {} never; {} POSTs for {n} operations",
                row.keys_sent_twice,
                row.keys_missing,
                row.posts
            );
        }
    }
    Ok(())
}

/// One measurement: `processes` relays of `job`.
struct Run<'a> {
    program: &'a std::path::Path,
    url: &'a str,
    job: &'a str,
    processes: usize,
    batch: u32,
    workers: usize,
}

/// What one measurement saw.
struct Measured {
    ops_per_s: f64,
    wall: Duration,
    posts: u64,
    keys_received: usize,
    keys_sent_twice: usize,
}

impl Run<'_> {
    /// Starts the processes against a fresh destination, waits for every
    /// one to drain and exit, then reads the records and the destination.
    async fn measure(&self, store: &PgStore, n: usize) -> anyhow::Result<Measured> {
        let destination = TestServer::start(Mode::Neither).await?;
        let start = Instant::now();
        let children = (0..self.processes)
            .map(|_| self.spawn(&destination.base_url()))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let outputs = futures::future::try_join_all(children.into_iter().map(|child| {
            tokio::time::timeout(Duration::from_secs(1800), child.wait_with_output())
        }))
        .await
        .context("a relay process ran over 30 minutes")?;
        for (i, out) in outputs.into_iter().enumerate() {
            let out = out?;
            anyhow::ensure!(
                out.status.success(),
                "relay process {i} of {} exited with {}: {}",
                self.processes,
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let wall = start.elapsed();
        let (records, completed) = job_records(store, self.job).await?;
        anyhow::ensure!(
            completed == n,
            "{} relay processes completed {completed} of {n} operations",
            self.processes
        );
        let first_claim = records.iter().filter_map(|r| r.claimed_at).min();
        let last_done = records.iter().filter_map(|r| r.completed_at).max();
        let span = match (first_claim, last_done) {
            (Some(first), Some(last)) => last.since(first),
            _ => anyhow::bail!("no claim or completion time among the records"),
        };
        let effects = destination.all_effects();
        Ok(Measured {
            // The clock counts milliseconds: a drain within one counts as one.
            ops_per_s: n as f64 / span.as_secs_f64().max(0.001),
            wall,
            posts: destination.posts(),
            keys_received: effects.len(),
            keys_sent_twice: effects.values().filter(|&&c| c > 1).count(),
        })
    }

    /// One `onceonly run --drain` process, its output kept for an error.
    fn spawn(&self, destination: &str) -> anyhow::Result<tokio::process::Child> {
        let (workers, batch) = (self.workers.to_string(), self.batch.to_string());
        tokio::process::Command::new(self.program)
            .args(["--db", self.url, "run", "--job", self.job])
            .args(["--http", destination, "--workers", &workers])
            .args(["--batch", &batch, "--lease", "30s", "--timeout", "10s"])
            .args(["--drain", "--effect", "opaque", "--on-stale", "hold"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", self.program.display()))
    }
}

/// A database made for the run on the server `--pg` names, so that the
/// relay processes find the tables in their default schema.
struct ScratchDb {
    admin_url: String,
    name: String,
    url: String,
}

impl ScratchDb {
    async fn create(admin_url: &str) -> anyhow::Result<Self> {
        let name = format!("onceonly_bench_{}", std::process::id());
        let mut url = url::Url::parse(admin_url).context("the PostgreSQL URL")?;
        url.set_path(&format!("/{name}"));
        let mut admin = PgConnection::connect(admin_url)
            .await
            .with_context(|| onceonly::db_url::redact(admin_url))?;
        admin
            .execute(format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)").as_str())
            .await?;
        admin
            .execute(format!("CREATE DATABASE \"{name}\"").as_str())
            .await
            .with_context(|| format!("creating the database {name}"))?;
        let _ = admin.close().await;
        Ok(Self {
            admin_url: admin_url.to_owned(),
            name,
            url: url.into(),
        })
    }

    async fn drop(self) -> anyhow::Result<()> {
        let mut admin = PgConnection::connect(&self.admin_url).await?;
        admin
            .execute(format!("DROP DATABASE \"{}\" WITH (FORCE)", self.name).as_str())
            .await
            .with_context(|| format!("could not drop the database {}", self.name))?;
        let _ = admin.close().await;
        Ok(())
    }
}
