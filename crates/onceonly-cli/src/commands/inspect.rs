//! `onceonly inspect`: list operation records, as a table or JSON lines.

use std::process::ExitCode;

use onceonly::store::OpList;
use onceonly::{escape_controls, Record, State, Store};

use crate::output::println;
use crate::store::{open_existing, with_store};

/// Arguments of `onceonly inspect`.
#[derive(clap::Args)]
pub struct Args {
    /// Only this job type.
    #[arg(long)]
    job: Option<String>,
    /// Only this state: queued, claimed, completed, failed, held, cancelled.
    #[arg(long)]
    state: Option<String>,
    /// One JSON object per line instead of a table.
    #[arg(long)]
    json: bool,
    /// At most this many records.
    #[arg(long)]
    limit: Option<u32>,
}

/// Prints the records the filters select, oldest update first.
pub async fn run(db: &str, args: Args) -> anyhow::Result<ExitCode> {
    let state = args.state.as_deref().map(str::parse::<State>).transpose()?;
    let store = open_existing(db).await?;
    let list = OpList {
        job_type: args.job.as_deref(),
        state,
        lease_expired: false,
        limit: args.limit,
    };
    let records = with_store!(&store, s => s.op_list(&list).await)?;
    if args.json {
        for r in &records {
            println!("{}", serde_json::to_string(r)?);
        }
    } else {
        print_table(&records);
    }
    Ok(ExitCode::SUCCESS)
}

fn print_table(records: &[Record]) {
    println!(
        "{:<16} {:<24} {:<10} {:>5} {:>8}  {:<18} {:<24} error",
        "job", "key", "state", "token", "attempts", "external_ref", "updated_at"
    );
    for r in records {
        // Values from outside (the destination's reference, its error) are
        // shown with their control characters escaped.
        println!(
            "{:<16} {:<24} {:<10} {:>5} {:>8}  {:<18} {:<24} {}",
            r.job_type,
            escape_controls(&r.op_key),
            r.state.as_str(),
            r.token,
            r.attempts,
            escape_controls(r.external_ref.as_deref().unwrap_or("-")),
            r.updated_at.to_string(),
            escape_controls(r.error.as_deref().unwrap_or(""))
        );
    }
    println!("{} records", records.len());
}
