//! `onceonly cancel`: cancel an operation and withdraw it at the destination.
//! Exits 0 only when the operation ends cancelled with nothing of it live;
//! a queued or failed operation that was claimed before is looked up at the
//! destination first. Without one that can look, a queued operation is held
//! (its retry stopped) for a person to resolve, and a failed one is left as
//! it is.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use onceonly::ops::{cancel_as, get, CancelOutcome};
use onceonly::{State, Store};
use onceonly_http::HttpDestination;

use crate::commands::config::Config;
use crate::commands::destination;
use crate::commands::resolve::actor;
use crate::store::{open_migrated, with_store};

/// Arguments of `onceonly cancel`.
#[derive(clap::Args)]
pub struct Args {
    /// Job type.
    #[arg(long)]
    job: String,
    /// Operation key.
    #[arg(long)]
    key: String,
    /// The destination to look a sent item up at and withdraw it from
    /// (http:// or https://): needed for a completed operation, and for a
    /// queued or failed one that was claimed before.
    #[arg(long)]
    http: Option<String>,
    /// The settings file (onceonly.toml): the job's destination, request
    /// shape (its withdraw request) and CA file; --http overrides the URL.
    #[arg(long)]
    config: Option<PathBuf>,
    /// A PEM file of certificate authorities trusted next to the system's.
    #[arg(long, value_name = "FILE")]
    ca_cert: Option<PathBuf>,
    /// A header on every request, "NAME: VALUE"; VALUE may take {env.VAR}.
    /// Repeatable.
    #[arg(long = "header", value_name = "NAME: VALUE")]
    headers: Vec<String>,
    /// The longest answer body read from the destination, in bytes
    /// [default: the settings file's max_answer_bytes, else 65536].
    #[arg(long, value_name = "BYTES")]
    max_answer_bytes: Option<usize>,
    /// How long to wait for a worker holding the claim to stop or withdraw.
    #[arg(long, default_value = "30s", value_parser = onceonly::parse_duration)]
    wait: Duration,
}

impl Args {
    /// The destination to withdraw from: --http, or the settings file's,
    /// with the job's shape; none when neither names one.
    fn destination(&self) -> anyhow::Result<Option<HttpDestination>> {
        let config = self.config.as_deref().map(Config::load).transpose()?;
        let file = config.as_ref().map(|c| c.job(&self.job)).transpose()?;
        let Some(base) = self
            .http
            .clone()
            .or_else(|| file.and_then(|f| f.destination.clone()))
        else {
            return Ok(None);
        };
        let flags = destination::Flags {
            ca_cert: self.ca_cert.as_ref(),
            idempotency_header: None,
            headers: &self.headers,
            max_answer_bytes: self.max_answer_bytes,
        };
        let http = destination::build(
            &self.job,
            &base,
            file,
            &flags,
            None,
            Duration::from_secs(10),
        )?;
        Ok(Some(http))
    }
}

/// Cancels, waiting for an in-flight claim's owner when there is one.
pub async fn run(db: &str, args: Args) -> anyhow::Result<ExitCode> {
    let destination = args.destination()?;
    let store = open_migrated(db).await?;
    with_store!(&store, s => cancel_and_wait(s, &args, destination.as_ref()).await)
}

async fn cancel_and_wait<S: Store>(
    store: &S,
    args: &Args,
    destination: Option<&HttpDestination>,
) -> anyhow::Result<ExitCode> {
    let name = format!("{}:{}", args.job, args.key);
    let deadline = Instant::now() + args.wait;
    let mut outcome = cancel_as(store, &args.job, &args.key, destination, &actor()).await?;
    if let CancelOutcome::Requested { owner } = &outcome {
        eprintln!(
            "{name} is in flight (claimed by {}); cancel requested, waiting up to {} for it to stop or withdraw",
            owner.as_deref().unwrap_or("?"),
            humantime::format_duration(args.wait)
        );
        outcome = wait_for_owner(store, args, destination, deadline).await?;
    }
    let (code, sentence) = match outcome {
        CancelOutcome::Cancelled { withdrawn_ref: None } => (0, format!("{name} cancelled; nothing of it was sent")),
        CancelOutcome::Cancelled { withdrawn_ref: Some(r) } => {
            (0, format!("{name} cancelled; item {r} withdrawn at the destination"))
        }
        CancelOutcome::AlreadyCancelled => (0, format!("{name} was already cancelled")),
        CancelOutcome::Requested { owner } => (
            1,
            format!(
                "{name} is still in flight after {}: cancel requested, and its owner {} will stop before sending or withdraw after; check again",
                humantime::format_duration(args.wait),
                owner.as_deref().unwrap_or("?")
            ),
        ),
        CancelOutcome::StillLive { state, external_ref, reason } => (
            1,
            format!(
                "{name} stays {state}: item {} is still live at the destination ({reason})",
                external_ref.as_deref().unwrap_or("(no reference)")
            ),
        ),
        CancelOutcome::NotLookedUp { attempts, reason } => (
            1,
            format!(
                "{name} not cancelled: it was claimed {attempts} time(s) and may have been sent, and {reason}. \
                 Nothing was changed. Give --http URL or --config FILE (with the job's lookup request) \
                 so the cancel can look at the destination and withdraw what it finds; or check the destination by hand."
            ),
        ),
        CancelOutcome::HeldNotLookedUp { attempts, reason } => (
            1,
            format!(
                "{name} held, not cancelled: it was claimed {attempts} time(s) and may have been sent, and {reason}; \
                 its retry is stopped. Check the destination, then \
                 `onceonly resolve --job {job} --key {key} --as cancelled --reason WHY` \
                 (or --as queued to send it after all, --as completed --ref REF if it was sent)",
                job = args.job,
                key = args.key,
            ),
        ),
        CancelOutcome::Held => (
            1,
            format!("{name} is held: nobody knows whether the item exists; a person must resolve it first"),
        ),
    };
    // The reference and the reason come from the destination.
    let sentence = onceonly::escape_controls(&sentence);
    if code == 0 {
        println!("{sentence}");
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("{sentence}");
        Ok(ExitCode::from(code))
    }
}

/// Polls until the claim's owner settles the row, then finishes the cancel
/// (a row the owner completed is withdrawn like any completed one).
async fn wait_for_owner<S: Store>(
    store: &S,
    args: &Args,
    destination: Option<&HttpDestination>,
    deadline: Instant,
) -> anyhow::Result<CancelOutcome> {
    loop {
        let snap = get(store, &args.job, &args.key).await?;
        match snap.record.state {
            State::Cancelled => {
                return Ok(CancelOutcome::Cancelled {
                    withdrawn_ref: snap.record.external_ref,
                })
            }
            State::Claimed if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            State::Claimed => {
                return Ok(CancelOutcome::Requested {
                    owner: snap.record.owner,
                })
            }
            _ => return Ok(cancel_as(store, &args.job, &args.key, destination, &actor()).await?),
        }
    }
}
