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
}

/// Checks every job type of the file; exits 1 when a rule is broken.
pub async fn run(db: &str, args: Args) -> anyhow::Result<ExitCode> {
    let config = Config::load(&args.config)?;
    let file = config.path.display().to_string();
    if config.jobs.is_empty() {
        println!("{file}: no [jobs.NAME] tables: nothing to check");
        return Ok(ExitCode::SUCCESS);
    }
    let (lines, broken) = rules(&config);
    for l in lines {
        println!("{l}");
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
