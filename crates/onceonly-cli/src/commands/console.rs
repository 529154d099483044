//! `onceonly console`: the operator console, a set of web pages for held and
//! stuck operations (the `onceonly-console` crate). This module only parses
//! the flags, opens the database and hands over.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use onceonly_console::{check_listen, serve, Options};
use onceonly_http::HttpDestination;
use onceonly_tools::repeats::Request;

use crate::store::{open_migrated, with_store};

/// Arguments of `onceonly console`.
#[derive(clap::Args)]
pub struct Args {
    /// Where to listen. Beyond loopback a token is required.
    #[arg(long, default_value = "127.0.0.1:8090")]
    listen: SocketAddr,
    /// The token a person gives at login (at least 8 characters). Prefer the
    /// environment variable: a flag shows in the process list.
    #[arg(long, env = "ONCEONLY_CONSOLE_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Show everything, change nothing.
    #[arg(long)]
    read_only: bool,
    /// The destination to withdraw a completed operation from when it is
    /// cancelled from the console, and to look up a queued or failed one
    /// that was claimed before.
    #[arg(long)]
    http: Option<String>,
    /// How far back the overview counts finished operations and events.
    #[arg(long, default_value = "1h", value_parser = onceonly::parse_duration)]
    window: Duration,
    /// The settings file the check page reads (as `onceonly check --config`).
    #[arg(long)]
    config: Option<PathBuf>,
    /// The repeats page: your table holding one row per effect (as
    /// `onceonly repeats --table`), in the same database.
    #[arg(long, requires_all = ["repeats_key", "repeats_at"])]
    repeats_table: Option<String>,
    /// The repeats page: the column holding the operation's key.
    #[arg(long, requires = "repeats_table")]
    repeats_key: Option<String>,
    /// The repeats page: the column holding when the row was written.
    #[arg(long, requires = "repeats_table")]
    repeats_at: Option<String>,
}

/// Serves the console until stopped.
pub async fn run(db: &str, args: Args) -> anyhow::Result<ExitCode> {
    let mut options = Options::new(db);
    options.token = args.token.filter(|t| !t.is_empty());
    options.read_only = args.read_only;
    options.window = args.window;
    options.config = args.config;
    if let (Some(table), Some(key), Some(at)) =
        (args.repeats_table, args.repeats_key, args.repeats_at)
    {
        options.repeats = Some(Request {
            table,
            key,
            at,
            deploys: Vec::new(),
            retry_window: Duration::from_secs(300),
            deploy_window: Duration::from_secs(600),
        });
    }
    options.destination = args
        .http
        .as_deref()
        .map(|url| HttpDestination::new(url, Duration::from_secs(10)))
        .transpose()?;
    // Refused before the database is opened or the port taken.
    check_listen(args.listen, &options)?;
    let store = open_migrated(db).await?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("--listen {}: cannot listen there", args.listen))?;
    eprintln!(
        "onceonly console: http://{}/ ({}{})",
        listener.local_addr()?,
        options.database,
        if options.read_only { ", read-only" } else { "" }
    );
    with_store!(store, s => serve(s, options, listener).await)?;
    Ok(ExitCode::SUCCESS)
}
