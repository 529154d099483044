//! `onceonly`: make a job's side effect happen once per business operation.
//! The command-line surface is docs/DESIGN.md section 6; one module per command.
#![forbid(unsafe_code)]

mod commands;
mod output;
mod store;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Make a background job's side effect happen once per business operation.
#[derive(Parser)]
#[command(name = "onceonly", version, about)]
struct Cli {
    /// Database: sqlite://PATH (relative), sqlite:///ABS/PATH (created if
    /// missing, except by `repeats`, which only reads), or postgres://...
    #[arg(
        long,
        global = true,
        env = "ONCEONLY_DB",
        // The URL may carry a password: --help never shows it.
        hide_env_values = true,
        default_value = "sqlite://onceonly.db"
    )]
    db: String,

    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Create or upgrade the tables (idempotent).
    Migrate,
    /// Queue operations for a relay.
    Enqueue(commands::enqueue::Args),
    /// Relay queued operations to an HTTP destination until stopped.
    Run(commands::run::Args),
    /// Consume an SQS queue or a JetStream consumer, each message guarded.
    Consume(commands::consume::Args),
    /// Cancel an operation, withdrawing it at the destination.
    Cancel(commands::cancel::Args),
    /// List operation records.
    Inspect(commands::inspect::Args),
    /// List held operations (waiting for a person), oldest first.
    Held(commands::held::Args),
    /// List stuck claims (claimed, lease over), oldest first.
    Stuck(commands::held::Args),
    /// Resolve a held operation: completed, queued, failed or cancelled.
    Resolve(commands::resolve::Args),
    /// Show an operation's audit trail: retries (attempt, reason, when due
    /// again), take-overs, holds, lost claims, cancels, compensations,
    /// resolves, failures; oldest first.
    History(commands::history::Args),
    /// Find past repeats in your own table (read-only): key, count, gaps, pattern.
    Repeats(commands::repeats::Args),
    /// Delete finished records (completed, failed, cancelled) older than a
    /// duration, with their audit trail; never claimed, queued or held ones.
    Purge(commands::purge::Args),
    /// Check onceonly.toml against the timing rules and the records.
    Check(commands::check::Args),
    /// Run the replay scenarios: duplicates, concurrency, crashes.
    Replay(commands::replay::Args),
    /// Measure guarded operations against the same SQL run raw.
    #[cfg(feature = "bench")]
    Bench(commands::bench::Args),
    /// Measure guarded operations against the same SQL run raw (not in
    /// this build: cargo feature `bench`).
    #[cfg(not(feature = "bench"))]
    Bench(commands::not_built::Args),
    /// Serve the operator console: held and stuck operations, resolved from a web page.
    #[cfg(feature = "console")]
    Console(commands::console::Args),
    /// Serve the operator console (not in this build: cargo feature `console`).
    #[cfg(not(feature = "console"))]
    Console(commands::not_built::Args),
    /// (internal) one replay worker process, killed by the harness.
    #[command(hide = true, name = "replay-worker")]
    ReplayWorker(commands::replay::WorkerArgs),
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("ONCEONLY_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"))
                // sqlx warns of a connect parameter it does not know with
                // its value: `?sslpassword=...` would be logged in clear.
                .add_directive(
                    "sqlx_postgres::options::parse=error"
                        .parse()
                        .expect("directive"),
                ),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let result = runtime.block_on(async move {
        let db = cli.db;
        match cli.command {
            Command::Migrate => commands::migrate::run(&db).await,
            Command::Enqueue(args) => commands::enqueue::run(&db, args).await,
            Command::Run(args) => commands::run::run(&db, args).await,
            Command::Consume(args) => commands::consume::run(&db, args).await,
            Command::Cancel(args) => commands::cancel::run(&db, args).await,
            Command::Inspect(args) => commands::inspect::run(&db, args).await,
            Command::Held(args) => {
                commands::held::run(&db, commands::held::Which::Held, args).await
            }
            Command::Stuck(args) => {
                commands::held::run(&db, commands::held::Which::Stuck, args).await
            }
            Command::Resolve(args) => commands::resolve::run(&db, args).await,
            Command::History(args) => commands::history::run(&db, args).await,
            Command::Repeats(args) => commands::repeats::run(&db, args).await,
            Command::Purge(args) => commands::purge::run(&db, args).await,
            Command::Check(args) => commands::check::run(&db, args).await,
            Command::Replay(args) => commands::replay::run(&db, args).await,
            #[cfg(feature = "bench")]
            Command::Bench(args) => commands::bench::run(&db, args).await,
            #[cfg(not(feature = "bench"))]
            Command::Bench(_) => commands::not_built::refuse("bench"),
            #[cfg(feature = "console")]
            Command::Console(args) => commands::console::run(&db, args).await,
            #[cfg(not(feature = "console"))]
            Command::Console(_) => commands::not_built::refuse("console"),
            Command::ReplayWorker(args) => commands::replay::worker(&db, args).await,
        }
    });
    match result {
        Ok(code) => code,
        Err(e) => {
            // An error may quote a value from outside (a key, an answer).
            eprintln!("onceonly: {}", onceonly::escape_controls(&format!("{e:#}")));
            ExitCode::from(2)
        }
    }
}
