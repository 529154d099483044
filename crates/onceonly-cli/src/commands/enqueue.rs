//! `onceonly enqueue`: queue one operation, or many from JSON lines, all or nothing.

use std::io::Read;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use onceonly::ops::{enqueue, enqueue_in, EnqueueOutcome};
use onceonly::{validate_job_type, validate_op_key, Error, Payload, Store};
use serde::Deserialize;

use crate::store::{open_migrated, with_store};

/// Arguments of `onceonly enqueue`.
#[derive(clap::Args)]
pub struct Args {
    /// Job type.
    #[arg(long)]
    job: String,
    /// Operation key, the business operation's stable id (an order number,
    /// an event id).
    #[arg(long, required_unless_present = "jsonl", conflicts_with = "jsonl")]
    key: Option<String>,
    /// Payload, JSON (the job's input, sent as the request body). Without
    /// it the operation has none, and every later enqueue of the key must
    /// carry none either.
    #[arg(long, requires = "key")]
    payload: Option<String>,
    /// A file (or - for standard input) with one {"key": ..., "payload": ...} per line.
    #[arg(long)]
    jsonl: Option<String>,
    /// Do not claim before this delay has passed, like 30s or 5m.
    #[arg(long, value_parser = onceonly::parse_duration)]
    delay: Option<Duration>,
}

/// Queues what the arguments name.
pub async fn run(db: &str, args: Args) -> anyhow::Result<ExitCode> {
    validate_job_type(&args.job)?;
    let store = open_migrated(db).await?;
    match (&args.key, &args.jsonl) {
        (Some(key), _) => with_store!(&store, s => one(s, &args, key).await),
        (None, Some(file)) => {
            let lines = read_lines(file)?;
            with_store!(&store, s => batch(s, &args, &lines).await)
        }
        (None, None) => unreachable!("clap requires --key or --jsonl"),
    }
}

async fn one<S: Store>(store: &S, args: &Args, key: &str) -> anyhow::Result<ExitCode> {
    let payload = match &args.payload {
        Some(text) => Payload::parse(text)?,
        None => Payload::none(),
    };
    match enqueue(store, &args.job, key, &payload, args.delay).await? {
        EnqueueOutcome::Queued if payload.json.is_none() => println!(
            "queued {}:{key} without a payload (every later enqueue of this key must carry none)",
            args.job
        ),
        EnqueueOutcome::Queued => println!("queued {}:{key}", args.job),
        EnqueueOutcome::AlreadyExists(r) => println!(
            "{}:{key} already exists with the same payload ({}); nothing changed",
            args.job, r.state
        ),
    }
    Ok(ExitCode::SUCCESS)
}

fn read_lines(file: &str) -> anyhow::Result<String> {
    let mut text = String::new();
    if file == "-" {
        std::io::stdin()
            .read_to_string(&mut text)
            .context("reading standard input")?;
    } else {
        text = std::fs::read_to_string(file).with_context(|| format!("reading {file}"))?;
    }
    Ok(text)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    key: String,
    #[serde(default)]
    payload: Option<serde_json::Value>,
}

/// Parses one JSON line into its key and payload, naming the problem.
fn parse_line(text: &str) -> Result<(String, Payload), String> {
    let line: Line = serde_json::from_str(text)
        .map_err(|e| format!("not a {{\"key\": ..., \"payload\": ...}} JSON object: {e}"))?;
    onceonly::json_keys::refuse_duplicate_keys(text).map_err(|e| e.to_string())?;
    validate_op_key(&line.key).map_err(|e| e.to_string())?;
    let payload = line
        .payload
        .as_ref()
        .map_or_else(Payload::none, Payload::from_value);
    Ok((line.key, payload))
}

/// All lines in one transaction: if any line is refused, every refused line
/// is named and nothing is queued.
async fn batch<S: Store>(store: &S, args: &Args, text: &str) -> anyhow::Result<ExitCode> {
    let mut refused = Vec::new();
    let mut parsed = Vec::new();
    for (n, raw) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        match parse_line(raw) {
            Ok(op) => parsed.push((n + 1, op)),
            Err(why) => refused.push(format!("line {}: {why}", n + 1)),
        }
    }
    let mut tx = store.begin().await?;
    let (mut queued, mut existing) = (0, 0);
    for (n, (key, payload)) in &parsed {
        match enqueue_in(store, &mut tx, &args.job, key, payload, args.delay).await {
            Ok(EnqueueOutcome::Queued) => queued += 1,
            Ok(EnqueueOutcome::AlreadyExists(_)) => existing += 1,
            Err(e @ (Error::PayloadMismatch { .. } | Error::Invalid(_))) => {
                refused.push(format!("line {n}: key {key:?}: {e}"))
            }
            Err(e) => return Err(e.into()),
        }
    }
    if !refused.is_empty() {
        drop(tx); // rolls back: all or nothing
        for line in &refused {
            eprintln!("refused {line}");
        }
        eprintln!("nothing queued: {} line(s) refused", refused.len());
        return Ok(ExitCode::from(1));
    }
    S::commit(tx).await?;
    println!(
        "queued {queued} operations of job {}; {existing} existed with the same payload",
        args.job
    );
    Ok(ExitCode::SUCCESS)
}
