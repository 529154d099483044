//! `onceonly run`: relay queued operations to an HTTP destination until
//! SIGTERM or Ctrl-C (or, with --drain, until nothing is left).

use std::process::ExitCode;
use std::time::Duration;

use onceonly::relay::{Relay, RelayConfig};
use onceonly::{EffectKind, Guard, JobSpec, StalePolicy, Store};
use onceonly_http::HttpDestination;
use tokio::sync::watch;

use crate::store::{open_migrated, with_store};

/// Arguments of `onceonly run`.
#[derive(clap::Args)]
pub struct Args {
    /// Job type to relay.
    #[arg(long)]
    job: String,
    /// The destination's base URL (POST BASE/items).
    #[arg(long)]
    http: String,
    /// keyed (the destination dedups on Idempotency-Key), lookup (it can be
    /// searched by key) or opaque (neither).
    #[arg(long, value_parser = ["keyed", "lookup", "opaque"])]
    effect: String,
    /// Opaque only: what to do when nobody can tell whether the effect happened.
    #[arg(long, value_parser = ["hold", "at-least-once", "at-most-once"])]
    on_stale: Option<String>,
    /// Concurrent claim loops.
    #[arg(long, default_value_t = 4)]
    workers: usize,
    /// Rows claimed per statement by each loop (acted on concurrently).
    #[arg(long, default_value_t = 1)]
    batch: u32,
    /// How long a claim is live.
    #[arg(long, default_value = "30s", value_parser = onceonly::parse_duration)]
    lease: Duration,
    /// The whole attempt, HTTP included.
    #[arg(long, default_value = "10s", value_parser = onceonly::parse_duration)]
    timeout: Duration,
    /// Renew the lease this often (for a timeout longer than the lease).
    #[arg(long, value_parser = onceonly::parse_duration)]
    heartbeat: Option<Duration>,
    /// Exit 0 once nothing is queued and no claim is live.
    #[arg(long)]
    drain: bool,
}

impl Args {
    fn spec(&self) -> anyhow::Result<JobSpec> {
        let policy: StalePolicy = match (&self.on_stale, self.effect.as_str()) {
            (Some(p), "opaque") => p.parse()?,
            (Some(p), kind) => anyhow::bail!(
                "--on-stale {p} applies to --effect opaque only; a {kind} effect redoes safely"
            ),
            (None, _) => StalePolicy::Hold,
        };
        let mut spec = JobSpec::new(&self.job, EffectKind::parse(&self.effect, policy)?)
            .lease(self.lease)
            .timeout(self.timeout);
        spec.heartbeat = self.heartbeat;
        spec.validate()?;
        Ok(spec)
    }
}

/// Relays until stopped; exits 0 after a clean stop or a drain.
pub async fn run(db: &str, args: Args) -> anyhow::Result<ExitCode> {
    let spec = args.spec()?;
    // One request may take half the attempt, so a retry still fits in it.
    let destination = HttpDestination::new(&args.http, spec.timeout / 2)?;
    let store = open_migrated(db).await?;
    let config = RelayConfig {
        workers: args.workers.max(1),
        batch: args.batch.max(1),
        drain: args.drain,
        ..RelayConfig::default()
    };
    with_store!(store, s => relay(s, spec, &destination, config).await)
}

async fn relay<S: Store>(
    store: S,
    spec: JobSpec,
    destination: &HttpDestination,
    config: RelayConfig,
) -> anyhow::Result<ExitCode> {
    let guard = Guard::new(store, spec)?;
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::spawn(async move {
        shutdown_signal().await;
        eprintln!("onceonly run: stopping: no new claims; letting in-flight attempts finish");
        let _ = stop_tx.send(true);
    });
    let relay = Relay::new(&guard, destination, config);
    relay.run(stop_rx).await?;
    eprintln!("onceonly run: {}", relay.stats().summary());
    Ok(ExitCode::SUCCESS)
}

async fn shutdown_signal() {
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
