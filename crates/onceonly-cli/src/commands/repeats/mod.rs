//! `onceonly repeats`: past repeats in the user's own table (read-only). The
//! analysis is [`onceonly_tools::repeats`], which the console shows too;
//! this module parses the flags and prints. The SQL run is printed (on
//! stderr with `--json`) so the user can run it themselves.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use onceonly_tools::repeats::{find, read_deploys, sql_note, summary, time, Repeat, Request};

/// Arguments of `onceonly repeats` (the global `--db` names the user's database).
#[derive(clap::Args)]
pub struct Args {
    /// The table (or view) holding one row per effect: a plain identifier,
    /// or schema.table on PostgreSQL (database.table on MySQL).
    #[arg(long)]
    table: String,
    /// The column holding the business operation's key.
    #[arg(long)]
    key: String,
    /// The column holding when the row was written: ISO 8601 text, Unix
    /// seconds, or a native timestamp.
    #[arg(long)]
    at: String,
    /// A file of deploy times, one ISO 8601 time per line (blank lines and
    /// lines starting with # are skipped).
    #[arg(long)]
    deploys: Option<PathBuf>,
    /// Gaps under this are retries; a longer one is a re-enqueue.
    #[arg(long, default_value = "5m", value_parser = onceonly::parse_duration)]
    retry_window: Duration,
    /// A repeat this close to a deploy (before or after it) is the deploy's.
    #[arg(long, default_value = "10m", value_parser = onceonly::parse_duration)]
    deploy_window: Duration,
    /// One JSON object per key instead of a table (the SQL goes to stderr).
    #[arg(long)]
    json: bool,
}

/// Lists the repeats, table or JSON lines.
pub async fn run(db: &str, args: Args) -> anyhow::Result<ExitCode> {
    let mut request = Request {
        table: args.table,
        key: args.key,
        at: args.at,
        deploys: Vec::new(),
        retry_window: args.retry_window,
        deploy_window: args.deploy_window,
    };
    // Printed before the query runs, as the user may want it if it fails.
    let (_, note) = sql_note(db, &request)?;
    if let Some(path) = &args.deploys {
        request.deploys = read_deploys(path)?;
    }
    if args.json {
        eprint!("{note}");
    } else {
        println!("{note}");
    }
    let report = find(db, &request).await?;
    if args.json {
        for r in &report.repeats {
            println!("{}", serde_json::to_string(r)?);
        }
    } else {
        print_table(&report.repeats);
    }
    Ok(ExitCode::SUCCESS)
}

fn print_table(repeats: &[Repeat]) {
    if repeats.is_empty() {
        println!("no key has more than one row");
        return;
    }
    let key_w = repeats
        .iter()
        .map(|r| r.key.chars().count())
        .max()
        .unwrap_or(3)
        .clamp(3, 40);
    println!(
        "{:<key_w$}  {:>5}  {:<24}  {:<24}  {:<10}  gaps",
        "key", "count", "first_at", "last_at", "pattern"
    );
    for r in repeats {
        let mut gaps: Vec<String> = r
            .gaps_ms
            .iter()
            .take(8)
            .map(|&g| time::format_gap(g))
            .collect();
        if r.gaps_ms.len() > 8 {
            gaps.push(format!("... ({} more)", r.gaps_ms.len() - 8));
        }
        let near = r
            .deploy_at
            .as_deref()
            .map(|d| format!("  (deploy at {d})"))
            .unwrap_or_default();
        println!(
            "{:<key_w$}  {:>5}  {:<24}  {:<24}  {:<10}  {}{near}",
            r.key,
            r.count,
            r.first_at,
            r.last_at,
            r.pattern.as_str(),
            gaps.join(", ")
        );
    }
    println!("{}", summary(repeats));
}
