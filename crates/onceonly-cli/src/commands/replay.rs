//! `onceonly replay`: placeholder until the replay harness lands.

use std::process::ExitCode;

/// Arguments of `onceonly replay`.
#[derive(clap::Args)]
pub struct Args {}

/// Arguments of the hidden `onceonly replay-worker`.
#[derive(clap::Args)]
pub struct WorkerArgs {}

/// Runs `onceonly replay`.
pub async fn run(_db: &str, _args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("replay is not built yet")
}

/// Runs one replay worker process.
pub async fn worker(_db: &str, _args: WorkerArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("replay is not built yet")
}
