//! `onceonly purge`: delete finished records (completed, failed, cancelled)
//! not updated for a while, with their audit trail. Claimed, queued and
//! held records are never purged.

use std::process::ExitCode;
use std::time::Duration;

use onceonly::validate_job_type;

use crate::store::{open_migrated, with_store};

/// Arguments of `onceonly purge`.
#[derive(clap::Args)]
pub struct Args {
    /// Purge finished records not updated for this long (such as 30d, 12h).
    #[arg(long, value_parser = onceonly::parse_duration)]
    older_than: Duration,
    /// Only this job type (every job type when not given).
    #[arg(long)]
    job: Option<String>,
}

/// Purges, and says how many records went.
pub async fn run(db: &str, args: Args) -> anyhow::Result<ExitCode> {
    if let Some(job) = &args.job {
        validate_job_type(job)?;
    }
    let store = open_migrated(db).await?;
    let job = args.job.as_deref();
    let purged = with_store!(&store, s => onceonly::ops::purge(s, job, args.older_than).await)?;
    println!(
        "purged {purged} finished record{} not updated for {}{}",
        if purged == 1 { "" } else { "s" },
        humantime::format_duration(args.older_than),
        job.map(|j| format!(" (job {j})")).unwrap_or_default()
    );
    Ok(ExitCode::SUCCESS)
}
