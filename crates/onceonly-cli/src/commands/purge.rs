//! `onceonly purge`: delete finished records (completed, failed, cancelled)
//! not updated for a while, with their audit trail. Claimed, queued and
//! held records are never purged, and neither is a finished record younger
//! than the redelivery horizon (it still stops a repeat) unless `--force`,
//! which the audit trail records.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use humantime::format_duration;
use onceonly::store::OpAudit;
use onceonly::{validate_job_type, AuditKind, Store};

use super::config::Config;
use super::purge_horizon::{self, Horizon};
use crate::store::{open_migrated, with_store};

/// Who a forced purge's audit entry names.
const ACTOR: &str = "onceonly purge --force";

/// Arguments of `onceonly purge`.
#[derive(clap::Args)]
pub struct Args {
    /// Purge finished records not updated for this long (such as 30d, 12h);
    /// at least the longest redelivery horizon known (each job's lease,
    /// timeout and redelivery timeout; the leases of live claims).
    #[arg(long, value_parser = onceonly::parse_duration)]
    older_than: Duration,
    /// Only this job type (every job type when not given).
    #[arg(long)]
    job: Option<String>,
    /// The job settings file whose leases, timeouts and redelivery timeouts
    /// the horizon includes.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Purge even inside the redelivery horizon (a repeat may then run
    /// again); recorded in the audit trail (`history --purges`).
    #[arg(long)]
    force: bool,
}

/// Purges, and says how many records went.
pub async fn run(db: &str, args: Args) -> anyhow::Result<ExitCode> {
    if let Some(job) = &args.job {
        validate_job_type(job)?;
    }
    let config = args.config.as_deref().map(Config::load).transpose()?;
    let store = open_migrated(db).await?;
    with_store!(&store, s => purge(s, &args, config.as_ref()).await)
}

async fn purge<S: Store>(
    store: &S,
    args: &Args,
    config: Option<&Config>,
) -> anyhow::Result<ExitCode> {
    let job = args.job.as_deref();
    let horizon = purge_horizon::longest(store, job, config).await?;
    let inside = args.older_than < horizon.length;
    if inside && !args.force {
        anyhow::bail!(
            "purge --older-than {} is shorter than the redelivery horizon, {horizon}: a finished \
             record younger than that still stops a repeat (a late redelivery finding no record \
             runs again). Give --older-than {} or longer, or --force to purge anyway (recorded \
             in the audit trail)",
            format_duration(args.older_than),
            format_duration(horizon.length),
        );
    }
    let purged = onceonly::ops::purge(store, job, args.older_than).await?;
    println!(
        "purged {purged} finished record{} not updated for {}{}",
        if purged == 1 { "" } else { "s" },
        format_duration(args.older_than),
        job.map(|j| format!(" (job {j})")).unwrap_or_default()
    );
    if inside {
        record_forced(store, args, &horizon, purged).await?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Appends the `purged` audit entry of a purge inside the horizon, under the
/// job type (`*`: every one) and the empty key, which no operation has.
async fn record_forced<S: Store>(
    store: &S,
    args: &Args,
    horizon: &Horizon,
    purged: u64,
) -> anyhow::Result<()> {
    let detail = format!(
        "purged {purged} finished records not updated for {}, inside the redelivery horizon {horizon}",
        format_duration(args.older_than)
    );
    let entry = OpAudit {
        job_type: args.job.as_deref().unwrap_or("*"),
        op_key: "",
        event: AuditKind::Purged,
        actor: ACTOR,
        token: 0,
        from: None,
        to: None,
        detail: Some(&detail),
        attempt: None,
        retry_after: None,
    };
    store
        .op_audit(&entry)
        .await
        .map_err(|e| anyhow::anyhow!("{detail}, but the audit trail could not record it: {e}"))?;
    println!(
        "recorded in the audit trail: onceonly history --purges{}",
        args.job
            .as_deref()
            .map(|j| format!(" --job {j}"))
            .unwrap_or_default()
    );
    Ok(())
}
