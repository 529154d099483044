//! `onceonly held` and `onceonly stuck`: the operations waiting for a person
//! (held) and the claims past their lease that nobody settled (stuck),
//! oldest first. Age is measured on the database's clock, like every lease.

use std::process::ExitCode;

use onceonly::operator::{list, short_duration as short, started};
use onceonly::{DbTime, Record, State};
use serde::Serialize;

use crate::output::println;
use crate::store::{open_existing, with_store};

/// Arguments of `onceonly held` and `onceonly stuck`.
#[derive(clap::Args)]
pub struct Args {
    /// Only this job type.
    #[arg(long)]
    job: Option<String>,
    /// One JSON object per line instead of a table.
    #[arg(long)]
    json: bool,
}

pub use onceonly::operator::Which;

/// One listed operation, as `--json` prints it.
#[derive(Debug, Serialize)]
struct Line<'a> {
    job: &'a str,
    key: &'a str,
    state: State,
    token: i64,
    owner: Option<&'a str>,
    attempts: i64,
    /// Since the claim in question was taken (or the record created), ms.
    age_ms: i64,
    age: String,
    claimed_at: Option<DbTime>,
    lease_until: Option<DbTime>,
    /// Length of the claim's lease, ms (stuck claims).
    lease_ms: Option<i64>,
    /// How long ago the lease ran out, ms (stuck claims).
    over_lease_ms: Option<i64>,
    external_ref: Option<&'a str>,
    error: Option<&'a str>,
    cancel_requested: bool,
    updated_at: DbTime,
    /// The database's clock when listed.
    now: DbTime,
}

/// Lists held operations or stuck claims, oldest first.
pub async fn run(db: &str, which: Which, args: Args) -> anyhow::Result<ExitCode> {
    let store = open_existing(db).await?;
    let job = args.job.as_deref();
    let (records, now) = with_store!(&store, s => list(s, which, job, None, 0).await)?;
    let lines: Vec<Line<'_>> = records.iter().map(|r| line(r, now)).collect();
    if args.json {
        for l in &lines {
            println!("{}", serde_json::to_string(l)?);
        }
    } else {
        print_table(which, &lines);
    }
    Ok(ExitCode::SUCCESS)
}

fn ms(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

fn line(r: &Record, now: DbTime) -> Line<'_> {
    let age = now.since(started(r));
    let stuck = r.state == State::Claimed;
    Line {
        job: &r.job_type,
        key: &r.op_key,
        state: r.state,
        token: r.token,
        owner: r.owner.as_deref(),
        attempts: r.attempts,
        age_ms: ms(age),
        age: short(ms(age)),
        claimed_at: r.claimed_at,
        lease_until: r.lease_until,
        lease_ms: match (stuck, r.claimed_at, r.lease_until) {
            (true, Some(from), Some(until)) => Some(ms(until.since(from))),
            _ => None,
        },
        over_lease_ms: match (stuck, r.lease_until) {
            (true, Some(until)) => Some(ms(now.since(until))),
            _ => None,
        },
        external_ref: r.external_ref.as_deref(),
        error: r.error.as_deref(),
        cancel_requested: r.cancel_requested,
        updated_at: r.updated_at,
        now,
    }
}

fn print_table(which: Which, lines: &[Line<'_>]) {
    if lines.is_empty() {
        println!(
            "{}",
            match which {
                Which::Held => "no held operations",
                Which::Stuck => "no stuck claims",
            }
        );
        return;
    }
    let lease_head = match which {
        Which::Held => "lease",
        Which::Stuck => "lease (over by)",
    };
    let head = [
        "job",
        "key",
        "token",
        "owner",
        "attempts",
        "age",
        lease_head,
        "external_ref",
        "error",
    ];
    let rows: Vec<[String; 9]> = lines
        .iter()
        .map(|l| {
            let lease = match (l.lease_ms, l.over_lease_ms) {
                (Some(lease), Some(over)) => format!("{} ({})", short(lease), short(over)),
                _ => "-".to_owned(),
            };
            [
                l.job.to_owned(),
                l.key.to_owned(),
                l.token.to_string(),
                l.owner.unwrap_or("-").to_owned(),
                l.attempts.to_string(),
                l.age.clone(),
                lease,
                l.external_ref.unwrap_or("-").to_owned(),
                l.error.unwrap_or("").to_owned(),
            ]
        })
        .collect();
    // Each column as wide as its widest cell (the last one unpadded).
    let mut widths = head.map(|h| h.chars().count());
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let print = |cells: &[&str]| {
        let mut line = String::new();
        for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
            if i + 1 == cells.len() {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<w$}  "));
            }
        }
        // Keys, owners, references and errors come from outside.
        println!("{}", onceonly::escape_controls(line.trim_end()));
    };
    print(&head);
    for row in &rows {
        print(&row.each_ref().map(String::as_str));
    }
    let what = match which {
        Which::Held => "held, waiting for a person (onceonly resolve)",
        Which::Stuck => "stuck: claimed, lease over, not yet settled by a worker",
    };
    println!("{} {what}", lines.len());
}
