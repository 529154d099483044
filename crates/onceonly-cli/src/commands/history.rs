//! `onceonly history`: why and when an operation's exceptional transitions
//! happened (take-overs, holds, lost claims, cancels, compensations,
//! resolves, permanent failures) and each retry, oldest first, under its
//! current state.

use std::process::ExitCode;

use onceonly::{escape_controls, AuditEvent, Error, Record, State, Store};

use crate::output::println;
use crate::store::{open_existing, with_store};

/// Arguments of `onceonly history`.
#[derive(clap::Args)]
pub struct Args {
    /// Job type.
    #[arg(long, required_unless_present = "purges")]
    job: Option<String>,
    /// Operation key.
    #[arg(long, required_unless_present = "purges", conflicts_with = "purges")]
    key: Option<String>,
    /// Instead of an operation's trail, the purges forced inside the
    /// redelivery horizon (`purge --force`) of --job, or of every job type.
    #[arg(long)]
    purges: bool,
    /// JSON lines: first the record (`"kind": "record"`), then one object per
    /// event (`"kind": "event"`).
    #[arg(long)]
    json: bool,
}

/// Prints the record's state line and its audit trail; exits 1 when there
/// is no such operation.
pub async fn run(db: &str, args: Args) -> anyhow::Result<ExitCode> {
    let store = open_existing(db).await?;
    with_store!(&store, s => show(s, &args).await)
}

async fn show<S: Store>(store: &S, args: &Args) -> anyhow::Result<ExitCode> {
    let job = args.job.as_deref().unwrap_or("*");
    let Some(key) = args.key.as_deref() else {
        // A forced purge's entry: under the job type and the empty key.
        let events = store.op_history(job, "").await?;
        if args.json {
            for e in &events {
                let mut event = serde_json::to_value(e)?;
                event["kind"] = "event".into();
                println!("{event}");
            }
        } else {
            print_events(&events);
        }
        return Ok(ExitCode::SUCCESS);
    };
    let snap = match onceonly::ops::get(store, job, key).await {
        Ok(snap) => snap,
        Err(e @ Error::NotFound { .. }) => {
            eprintln!("{e}: no record, so no history (purged, or never enqueued or claimed)");
            return Ok(ExitCode::from(1));
        }
        Err(e) => return Err(e.into()),
    };
    let events = store.op_history(job, key).await?;
    if args.json {
        let mut record = serde_json::to_value(&snap.record)?;
        record["kind"] = "record".into();
        println!("{record}");
        for e in &events {
            let mut event = serde_json::to_value(e)?;
            event["kind"] = "event".into();
            println!("{event}");
        }
    } else {
        print_record(&snap.record);
        print_events(&events);
    }
    Ok(ExitCode::SUCCESS)
}

fn print_record(r: &Record) {
    let line = format!(
        "{}:{} is {} (token {}, attempts {}, owner {}, updated {}){}",
        r.job_type,
        r.op_key,
        r.state,
        r.token,
        r.attempts,
        r.owner.as_deref().unwrap_or("-"),
        r.updated_at,
        r.error
            .as_deref()
            .map(|e| format!(": {e}"))
            .unwrap_or_default()
    );
    // The key, the owner and the error come from outside: control
    // characters escaped.
    println!("{}", escape_controls(&line));
}

fn state(s: Option<State>) -> &'static str {
    s.map_or("-", State::as_str)
}

fn print_events(events: &[AuditEvent]) {
    if events.is_empty() {
        println!(
            "no retries or exceptional transitions (claims and completions are not recorded here)"
        );
        return;
    }
    println!(
        "{:<24} {:<16} {:<24} {:>5}  {:<22} detail",
        "at", "event", "actor", "token", "from -> to"
    );
    for e in events {
        let line = format!(
            "{:<24} {:<16} {:<24} {:>5}  {:<22} {}",
            e.at.to_string(),
            e.event.as_str(),
            e.actor,
            e.token,
            format!("{} -> {}", state(e.from_state), state(e.to_state)),
            e.described()
        );
        println!("{}", escape_controls(&line));
    }
    println!("{} events", events.len());
}
