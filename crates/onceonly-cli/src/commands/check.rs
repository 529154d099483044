//! `onceonly check`: the settings file against the timing rules of
//! docs/DESIGN.md section 4, and against what the records show. Each broken rule
//! is named with its numbers and makes the exit non-zero; a job type whose
//! LONGEST observed claim-to-completion time exceeds half its lease or half
//! its timeout gets a warning (the exit stays 0 for warnings alone).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use onceonly::store::OpList;
use onceonly::{JobSpec, State, Store};

use super::config::Config;
use crate::store::{open_migrated, with_store};

/// Arguments of `onceonly check`.
#[derive(clap::Args)]
pub struct Args {
    /// The settings file.
    #[arg(long, default_value = "onceonly.toml")]
    config: PathBuf,
    /// Also read this SQS queue's VisibilityTimeout and RedrivePolicy and
    /// hold them against every job (cargo feature `sqs`).
    #[arg(long, value_name = "URL")]
    sqs_queue_url: Option<String>,
    /// The SQS endpoint, for an emulator such as moto.
    #[arg(long, value_name = "URL", requires = "sqs_queue_url")]
    sqs_endpoint: Option<String>,
    /// Also read this JetStream consumer's ack_wait and max_deliver, as
    /// STREAM/CONSUMER, and hold them against every job (cargo feature `nats`).
    #[arg(long, value_name = "STREAM/CONSUMER")]
    nats_consumer: Option<String>,
    /// The NATS server of --nats-consumer.
    #[arg(long, default_value = "nats://127.0.0.1:4222")]
    nats: String,
}

/// The longest claim-to-completion time seen for one job type.
#[derive(Debug, Clone, PartialEq)]
struct Longest {
    took: Duration,
    key: String,
    completed: usize,
}

/// Checks every job type of the file; exits 1 when a rule is broken.
pub async fn run(db: &str, args: Args) -> anyhow::Result<ExitCode> {
    let config = Config::load(&args.config)?;
    let file = config.path.display().to_string();
    if config.jobs.is_empty() {
        println!("{file}: no [jobs.NAME] tables: nothing to check");
        return Ok(ExitCode::SUCCESS);
    }
    let mut broken = 0;
    for settings in config.jobs.values() {
        let spec = settings.spec();
        let rules = spec.broken_timing_rules();
        if rules.is_empty() {
            println!(
                "job {}: timing rules hold ({})",
                spec.job_type,
                numbers(&spec)
            );
        }
        for rule in &rules {
            println!("job {}: rule broken: {rule}", spec.job_type);
        }
        broken += rules.len();
    }
    for redelivery in broker_settings(&args).await? {
        for settings in config.jobs.values() {
            let spec = settings.spec();
            let rules = onceonly_consume::timing::broken_rules(&spec, &redelivery);
            if rules.is_empty() {
                println!(
                    "job {}: {} ({} {}) holds against the job's timeout and heartbeat",
                    spec.job_type,
                    redelivery.source,
                    redelivery.timeout_name,
                    humantime::format_duration(redelivery.timeout)
                );
            }
            for rule in &rules {
                println!("job {}: rule broken: {rule}", spec.job_type);
            }
            broken += rules.len();
        }
    }

    let store = open_migrated(db).await?;
    let mut warnings = 0;
    for settings in config.jobs.values() {
        let spec = settings.spec();
        let longest = with_store!(&store, s => longest(s, &spec.job_type).await)?;
        let lines = judge(&spec, longest.as_ref());
        warnings += lines.iter().filter(|l| l.contains("warning:")).count();
        for l in lines {
            println!("{l}");
        }
    }

    if broken > 0 {
        eprintln!(
            "onceonly check: {broken} timing rule{} broken in {file}: a worker with these settings refuses to start",
            if broken == 1 { "" } else { "s" }
        );
        return Ok(ExitCode::from(1));
    }
    println!(
        "{file}: every timing rule holds{}",
        match warnings {
            0 => String::new(),
            n => format!(" ({n} warning{})", if n == 1 { "" } else { "s" }),
        }
    );
    Ok(ExitCode::SUCCESS)
}

/// The redelivery settings of each broker named on the command line.
async fn broker_settings(args: &Args) -> anyhow::Result<Vec<onceonly_consume::Redelivery>> {
    use super::consume::{nats_redelivery, sqs_redelivery, NatsQueue, SqsQueue};
    let mut out = Vec::new();
    if let Some(url) = &args.sqs_queue_url {
        let queue = SqsQueue {
            queue_url: url.clone(),
            sqs_endpoint: args.sqs_endpoint.clone(),
            dead_letter_queue: None,
        };
        out.push(sqs_redelivery(&queue).await?);
    }
    if let Some(names) = &args.nats_consumer {
        let (stream, consumer) = names.split_once('/').ok_or_else(|| {
            anyhow::anyhow!("--nats-consumer {names:?}: give it as STREAM/CONSUMER")
        })?;
        let queue = NatsQueue {
            nats: args.nats.clone(),
            stream: stream.to_owned(),
            consumer: consumer.to_owned(),
        };
        out.push(nats_redelivery(&queue).await?);
    }
    Ok(out)
}

fn numbers(spec: &JobSpec) -> String {
    let d = |d: Duration| humantime::format_duration(d).to_string();
    let o = |o: Option<Duration>| o.map_or_else(|| "-".to_owned(), d);
    format!(
        "effect {}, lease {}, timeout {}, heartbeat {}, redelivery timeout {}, lock lifetime {}",
        spec.effect,
        d(spec.lease),
        d(spec.timeout),
        o(spec.heartbeat),
        o(spec.redelivery_timeout),
        o(spec.lock_lifetime)
    )
}

/// The longest `completed_at - claimed_at` among the job type's completed records.
async fn longest<S: Store>(store: &S, job_type: &str) -> onceonly::Result<Option<Longest>> {
    let records = store
        .op_list(&OpList {
            job_type: Some(job_type),
            state: Some(State::Completed),
            ..OpList::default()
        })
        .await?;
    let completed = records.len();
    Ok(records
        .iter()
        .filter_map(|r| Some((r.completed_at?.since(r.claimed_at?), &r.op_key)))
        .max_by_key(|(took, _)| *took)
        .map(|(took, key)| Longest {
            took,
            key: key.clone(),
            completed,
        }))
}

/// The lines about one job type's records: the longest run against half
/// the lease and half the timeout.
fn judge(spec: &JobSpec, longest: Option<&Longest>) -> Vec<String> {
    let job = &spec.job_type;
    let d = |d: Duration| humantime::format_duration(d).to_string();
    let Some(l) = longest else {
        return vec![format!("job {job}: no completed records to compare with")];
    };
    let seen = format!(
        "the longest claim-to-completion time ({}, key {:?}, of {} completed)",
        d(round_ms(l.took)),
        l.key,
        l.completed
    );
    let mut lines = Vec::new();
    for (what, limit) in [("lease", spec.lease), ("timeout", spec.timeout)] {
        if l.took > limit / 2 {
            lines.push(format!(
                "job {job}: warning: {seen} is more than half the {what} ({}): raise the {what} or make the job shorter",
                d(limit)
            ));
        }
    }
    if lines.is_empty() {
        lines.push(format!(
            "job {job}: {seen} is within half the lease ({}) and half the timeout ({})",
            d(spec.lease),
            d(spec.timeout)
        ));
    }
    lines
}

fn round_ms(d: Duration) -> Duration {
    Duration::from_millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use onceonly::EffectKind;

    fn spec() -> JobSpec {
        JobSpec::new("j", EffectKind::Keyed)
            .lease(Duration::from_secs(30))
            .timeout(Duration::from_secs(10))
    }

    fn longest(secs: u64) -> Longest {
        Longest {
            took: Duration::from_secs(secs),
            key: "k".into(),
            completed: 4,
        }
    }

    #[test]
    fn within_half_is_quiet() {
        let lines = judge(&spec(), Some(&longest(5)));
        assert_eq!(lines.len(), 1);
        assert!(!lines[0].contains("warning"), "{lines:?}");
    }

    #[test]
    fn over_half_the_timeout_warns() {
        let lines = judge(&spec(), Some(&longest(6)));
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].contains("warning"), "{lines:?}");
        assert!(lines[0].contains("half the timeout (10s)"), "{lines:?}");
    }

    #[test]
    fn over_half_of_both_warns_twice() {
        let lines = judge(&spec(), Some(&longest(16)));
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[0].contains("half the lease (30s)"), "{lines:?}");
    }

    #[test]
    fn no_records() {
        assert!(judge(&spec(), None)[0].contains("no completed records"));
    }
}
