//! `onceonly run`: relay queued operations to an HTTP destination until
//! SIGTERM or Ctrl-C (or, with --drain, until nothing is left). With
//! `--config`, the job's settings come from onceonly.toml and the flags
//! given override them. With `--metrics ADDR`, it serves Prometheus metrics
//! at http://ADDR/metrics while it runs.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use onceonly::relay::{Relay, RelayConfig, RelayStats};
use onceonly::{EffectKind, Guard, JobSpec, StalePolicy, Store};
use onceonly_http::HttpDestination;
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::config::Config;
use super::destination;
use crate::store::{open_migrated, with_store};

/// Arguments of `onceonly run`.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    job: JobArgs,
    /// Concurrent claim loops.
    #[arg(long, default_value_t = 4)]
    workers: usize,
    /// Rows claimed per statement by each loop (acted on concurrently).
    #[arg(long, default_value_t = 1)]
    batch: u32,
    /// Exit 0 once nothing is queued and no claim is live.
    #[arg(long)]
    drain: bool,
    /// Serve Prometheus metrics at http://ADDR/metrics while the relay runs
    /// (such as 127.0.0.1:9464). Any address is accepted; the endpoint has
    /// no authentication, so prefer a loopback or private address.
    #[arg(long, value_name = "ADDR")]
    metrics: Option<SocketAddr>,
}

/// The job's settings and destination, shared by `run` and `consume`.
#[derive(clap::Args)]
pub struct JobArgs {
    /// Job type.
    #[arg(long)]
    job: String,
    /// The settings file (onceonly.toml): --job takes that job's settings
    /// from it; flags given here override them.
    #[arg(long)]
    config: Option<PathBuf>,
    /// The destination's base URL, http:// or https:// (POST BASE/items in
    /// the default shape). Required unless the settings file gives the job
    /// a destination.
    #[arg(long)]
    http: Option<String>,
    /// A PEM file of certificate authorities trusted next to the system's
    /// (for a private CA).
    #[arg(long, value_name = "FILE")]
    ca_cert: Option<PathBuf>,
    /// The header that carries JOB:KEY on a send, or `none` (the
    /// destination cannot dedup: --effect lookup or opaque).
    #[arg(long, value_name = "NAME|none")]
    idempotency_header: Option<String>,
    /// A header on every request, "NAME: VALUE"; VALUE may take
    /// {env.VAR} (read at start; a missing variable refuses to start).
    /// Repeatable.
    #[arg(long = "header", value_name = "NAME: VALUE")]
    headers: Vec<String>,
    /// The longest answer body read from the destination, in bytes; a
    /// longer one is cut (a done answer whose id is in it is then unknown)
    /// [default: the settings file's max_answer_bytes, else 65536].
    #[arg(long, value_name = "BYTES")]
    max_answer_bytes: Option<usize>,
    /// keyed (the destination dedups on Idempotency-Key), lookup (it can be
    /// searched by key) or opaque (neither). Required unless the settings
    /// file gives it.
    #[arg(long, value_parser = ["keyed", "lookup", "opaque"])]
    effect: Option<String>,
    /// Opaque only: what to do when nobody can tell whether the effect
    /// happened [default: hold].
    #[arg(long, value_parser = ["hold", "at-least-once", "at-most-once"])]
    on_stale: Option<String>,
    /// How long a claim is live [default: 30s].
    #[arg(long, value_parser = onceonly::parse_duration)]
    lease: Option<Duration>,
    /// The whole attempt, HTTP included [default: 10s].
    #[arg(long, value_parser = onceonly::parse_duration)]
    timeout: Option<Duration>,
    /// Each HTTP request's own limit, at most --timeout [default: what is
    /// left of --timeout when the request starts].
    #[arg(long, value_parser = onceonly::parse_duration)]
    request_timeout: Option<Duration>,
    /// Renew the lease this often (for a timeout longer than the lease).
    #[arg(long, value_parser = onceonly::parse_duration)]
    heartbeat: Option<Duration>,
}

impl JobArgs {
    /// The job's spec, destination and retention: the settings file's
    /// (when given) under the flags given here, over the defaults. Checked
    /// against the timing rules and the destination's shape.
    pub fn spec(&self) -> anyhow::Result<(JobSpec, HttpDestination, Option<Duration>)> {
        let config = self.config.as_deref().map(Config::load).transpose()?;
        let file = config.as_ref().map(|c| c.job(&self.job)).transpose()?;
        let effect = match (&self.effect, file) {
            (Some(e), _) => e.clone(),
            (None, Some(f)) => f.effect.name().to_owned(),
            (None, None) => anyhow::bail!(
                "--effect keyed|lookup|opaque is required (or --config with a file that gives this job's effect)"
            ),
        };
        let file_policy = file.and_then(|f| match f.effect {
            EffectKind::Opaque(p) => Some(p),
            _ => None,
        });
        let policy: StalePolicy = match (&self.on_stale, effect.as_str()) {
            (Some(p), "opaque") => p.parse()?,
            (Some(p), kind) => anyhow::bail!(
                "--on-stale {p} applies to --effect opaque only; a {kind} effect redoes safely"
            ),
            (None, _) => file_policy.unwrap_or(StalePolicy::Hold),
        };
        let kind = EffectKind::parse(&effect, policy)?;
        if kind == EffectKind::Local {
            anyhow::bail!(
                "job {}: a local effect runs inside your own code (onceonly::Guard), not in onceonly run",
                self.job
            );
        }
        let mut spec = match file {
            Some(f) => {
                let mut spec = f.spec();
                spec.effect = kind;
                spec
            }
            None => JobSpec::new(&self.job, kind),
        };
        if let Some(d) = self.lease {
            spec.lease = d;
        }
        if let Some(d) = self.timeout {
            spec.timeout = d;
        }
        if let Some(d) = self.heartbeat {
            spec.heartbeat = Some(d);
        }
        spec.validate()?;
        let http = match (&self.http, file.and_then(|f| f.destination.as_ref())) {
            (Some(url), _) | (None, Some(url)) => url.clone(),
            (None, None) => anyhow::bail!(
                "--http BASE_URL is required (or --config with a file that gives this job's destination)"
            ),
        };
        let flags = destination::Flags {
            ca_cert: self.ca_cert.as_ref(),
            idempotency_header: self.idempotency_header.as_deref(),
            headers: &self.headers,
            max_answer_bytes: self.max_answer_bytes,
        };
        let http = destination::build(
            &self.job,
            &http,
            file,
            &flags,
            Some(spec.effect),
            self.request_limit(spec.timeout)?,
        )?;
        Ok((spec, http, file.and_then(|f| f.retention)))
    }
}

impl JobArgs {
    /// The bound of one request: `--request-timeout` when given, else the
    /// whole attempt's, so a request may use what is left of it (the
    /// attempt's own bound cuts it at the attempt's end).
    fn request_limit(&self, attempt: Duration) -> anyhow::Result<Duration> {
        match self.request_timeout {
            Some(r) if r.is_zero() => anyhow::bail!("--request-timeout must be more than 0s"),
            Some(r) if r > attempt => anyhow::bail!(
                "--request-timeout ({}) is longer than the job timeout ({}): the attempt's limit would always cut the request first; lower it or raise --timeout",
                humantime::format_duration(r),
                humantime::format_duration(attempt)
            ),
            Some(r) => Ok(r),
            None => Ok(attempt),
        }
    }
}

/// Relays until stopped; exits 0 after a clean stop or a drain.
pub async fn run(db_url: &str, args: Args) -> anyhow::Result<ExitCode> {
    let (spec, destination, retention) = args.job.spec()?;
    let metrics = match args.metrics {
        Some(addr) => Some(
            TcpListener::bind(addr)
                .await
                .with_context(|| format!("--metrics {addr}: cannot listen there"))?,
        ),
        None => None,
    };
    let store = open_migrated(db_url)
        .await
        .map_err(|e| refused_for_good(db_url, e.into()))?;
    let config = RelayConfig {
        workers: args.workers.max(1),
        batch: args.batch.max(1),
        drain: args.drain,
        ..RelayConfig::default()
    };
    with_store!(store, s => relay(s, spec, &destination, config, retention, metrics).await)
        .map_err(|e| refused_for_good(db_url, e))
}

/// A database that refuses for good (read-only, permission denied, a
/// missing table) named, with what to do; other errors as they are.
fn refused_for_good(db_url: &str, e: anyhow::Error) -> anyhow::Error {
    match e.downcast_ref::<onceonly::Error>() {
        Some(db) if db.is_permanent_db_error() => anyhow::anyhow!(
            "run stopped: the database {} {db}; retrying cannot mend that: \
             make it writable by this process (or migrate it), then run again",
            onceonly::db_url::redact(db_url)
        ),
        _ => e,
    }
}

async fn relay<S: Store>(
    store: S,
    spec: JobSpec,
    destination: &HttpDestination,
    config: RelayConfig,
    retention: Option<Duration>,
    metrics: Option<TcpListener>,
) -> anyhow::Result<ExitCode> {
    let guard = Guard::new(store, spec)?;
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::spawn(async move {
        shutdown_signal().await;
        eprintln!("onceonly run: stopping: no new claims; letting in-flight attempts finish");
        let _ = stop_tx.send(true);
    });
    let mut relay = Relay::new(&guard, destination, config);
    if let Some(retention) = retention {
        relay = relay.with_retention(retention);
    }
    let server = match metrics {
        Some(listener) => {
            let addr = listener.local_addr()?;
            eprintln!("onceonly run: metrics at http://{addr}/metrics");
            let job = guard.spec().job_type.clone();
            Some(tokio::spawn(serve_metrics(
                listener,
                relay.stats_handle(),
                job,
            )))
        }
        None => None,
    };
    let ran = relay.run(stop_rx).await;
    if let Some(server) = server {
        server.abort();
    }
    ran?;
    eprintln!("onceonly run: {}", relay.stats().summary());
    Ok(ExitCode::SUCCESS)
}

/// Serves GET /metrics (the relay's counters in the Prometheus text format)
/// until aborted.
async fn serve_metrics(listener: TcpListener, stats: Arc<RelayStats>, job: String) {
    use axum::extract::State;
    use axum::http::header::CONTENT_TYPE;
    use axum::routing::get;

    async fn metrics(
        State((stats, job)): State<(Arc<RelayStats>, Arc<str>)>,
    ) -> ([(axum::http::HeaderName, &'static str); 1], String) {
        (
            [(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
            stats.render_prometheus(&job),
        )
    }

    let app = axum::Router::new()
        .route("/metrics", get(metrics))
        .with_state((stats, Arc::<str>::from(job)));
    if let Err(e) = axum::serve(listener, app).await {
        tracing::error!(error = %e, "the metrics endpoint stopped");
    }
}

pub async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("installing the SIGTERM handler");
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
