//! `onceonly check`: the settings file against the timing rules of
//! docs/DESIGN.md section 4, and against what the records show. Each broken rule
//! is named with its numbers and makes the exit non-zero; a job type whose
//! LONGEST observed claim-to-completion time exceeds half its lease or half
//! its timeout gets a warning (the exit stays 0 for warnings alone). The
//! lines are [`onceonly_tools::check`]'s, which the console shows too.

use std::path::PathBuf;
use std::process::ExitCode;

use onceonly_tools::check::{records, rules};

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

/// Checks every job type of the file; exits 1 when a rule is broken.
pub async fn run(db: &str, args: Args) -> anyhow::Result<ExitCode> {
    let config = Config::load(&args.config)?;
    let file = config.path.display().to_string();
    if config.jobs.is_empty() {
        println!("{file}: no [jobs.NAME] tables: nothing to check");
        return Ok(ExitCode::SUCCESS);
    }
    let (lines, mut broken) = rules(&config);
    for l in lines {
        println!("{l}");
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
    let (lines, warnings) = with_store!(&store, s => records(s, &config).await)?;
    for l in lines {
        println!("{l}");
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
