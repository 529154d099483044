//! `onceonly repeats`: past repeats in the user's own table. Lists every key
//! with more than one row, its count, first and last time, the gaps, and the
//! pattern they show (see [`pattern`]). Read-only: SQLite is opened
//! read-only and PostgreSQL is read in a READ ONLY transaction. The SQL run
//! is printed (on stderr with `--json`) so the user can run it themselves.

mod pattern;
mod sql;
mod time;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use serde::Serialize;

use pattern::{classify, Pattern, Windows};
use sql::{Backend, Plan};
use time::Millis;

/// Arguments of `onceonly repeats` (the global `--db` names the user's database).
#[derive(clap::Args)]
pub struct Args {
    /// The table (or view) holding one row per effect: a plain identifier,
    /// or schema.table on PostgreSQL.
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

/// One repeated key, as printed.
#[derive(Debug, Serialize)]
struct Repeat {
    key: String,
    count: usize,
    first_at: String,
    last_at: String,
    /// Gaps between consecutive rows, in seconds.
    gaps_s: Vec<f64>,
    pattern: Pattern,
    /// For `deploy`: the deploy the repeat was near.
    deploy_at: Option<String>,
    #[serde(skip)]
    first_ms: Millis,
    #[serde(skip)]
    gaps_ms: Vec<Millis>,
}

/// Lists the repeats, table or JSON lines.
pub async fn run(db: &str, args: Args) -> anyhow::Result<ExitCode> {
    let backend = Backend::of(db)?;
    let plan = Plan::new(backend, &args.table, &args.key, &args.at)?;
    let deploys = match &args.deploys {
        Some(path) => read_deploys(path)?,
        None => Vec::new(),
    };
    let windows = Windows {
        retry: millis(args.retry_window),
        deploy: millis(args.deploy_window),
    };
    let script = plan.script();
    let sql_note = format!(
        "-- the SQL run ({}), to run yourself:\n{script}",
        match backend {
            Backend::Sqlite => "on a read-only connection",
            Backend::Postgres => "in a read-only transaction",
        }
    );
    if args.json {
        eprint!("{sql_note}");
    } else {
        println!("{sql_note}");
    }
    let rows = plan.run(db).await?;

    let mut by_key: BTreeMap<String, Vec<Millis>> = BTreeMap::new();
    for row in rows {
        let at = row.at.millis().map_err(|why| {
            anyhow::anyhow!(
                "key {:?}, column {}: {why}; repeats reads ISO 8601 text, Unix seconds \
                 or a native timestamp",
                row.key,
                args.at
            )
        })?;
        by_key.entry(row.key).or_default().push(at);
    }
    let mut repeats: Vec<Repeat> = by_key
        .into_iter()
        .map(|(key, mut times)| {
            times.sort_unstable();
            let c = classify(&times, &deploys, windows);
            Repeat {
                key,
                count: times.len(),
                first_at: time::format(times[0]),
                last_at: time::format(*times.last().expect("two rows or more")),
                gaps_s: c.gaps.iter().map(|&g| g as f64 / 1000.0).collect(),
                pattern: c.pattern,
                deploy_at: c.deploy_at.map(time::format),
                first_ms: times[0],
                gaps_ms: c.gaps,
            }
        })
        .collect();
    repeats.sort_by(|a, b| (a.first_ms, &a.key).cmp(&(b.first_ms, &b.key)));

    if args.json {
        for r in &repeats {
            println!("{}", serde_json::to_string(r)?);
        }
    } else {
        print_table(&repeats);
    }
    Ok(ExitCode::SUCCESS)
}

fn millis(d: Duration) -> Millis {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Reads the deploys file: one ISO 8601 time per line, sorted on return.
fn read_deploys(path: &std::path::Path) -> anyhow::Result<Vec<Millis>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the deploys file {}", path.display()))?;
    let mut deploys = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let t = time::parse(line)
            .map_err(|why| anyhow::anyhow!("{}:{}: {why}", path.display(), n + 1))?;
        deploys.push(t);
    }
    deploys.sort_unstable();
    Ok(deploys)
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
    let extra: usize = repeats.iter().map(|r| r.count - 1).sum();
    let per: Vec<String> = Pattern::ALL
        .iter()
        .map(|p| {
            let n = repeats.iter().filter(|r| r.pattern == *p).count();
            format!("{n} {p}")
        })
        .collect();
    println!(
        "{} keys repeated, {extra} rows beyond the first: {}",
        repeats.len(),
        per.join(", ")
    );
}
