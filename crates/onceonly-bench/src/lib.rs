//! onceonly's benchmarks, as a library: `onceonly bench` parses its flags,
//! calls one of the three runs here and prints the rows it is handed.
//!
//! - [`guarded()`]: guarded operations against the same SQL statements run
//!   raw, in the same process and the same run, on SQLite, PostgreSQL and
//!   MySQL, for a no-op keyed effect and a local effect. On PostgreSQL and
//!   MySQL, keyed rows also run the minimal two-statement operation raw (by
//!   sqlx, and by pgbench or mariadb-slap when installed): what the
//!   database can do.
//! - [`relay()`]: the relay draining a queue, batched and not, next to the
//!   same claim and completion statements run alone.
//! - [`scale_out()`]: N real relay processes draining one queue on one
//!   PostgreSQL database into a destination that counts every request.
//!
//! Every figure is printed next to a baseline measured in the same run.

mod guarded;
mod minimal;
mod relay;
mod scale;
mod targets;
mod timing;

use std::str::FromStr;

pub use guarded::{guarded, GuardedOptions, GuardedRow};
pub use relay::{relay, RelayOptions, RelayRow};
pub use scale::{scale_out, ScaleOptions, ScaleRow};

/// A database the bench measures on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    /// SQLite on a fresh temporary file.
    Sqlite,
    /// PostgreSQL in a fresh schema (or, for [`scale_out()`], a fresh
    /// database), dropped afterwards.
    Postgres,
    /// MySQL or MariaDB in a fresh database, dropped afterwards.
    MySql,
}

impl StoreKind {
    /// Its name in the report.
    pub fn name(self) -> &'static str {
        match self {
            StoreKind::Sqlite => "sqlite",
            StoreKind::Postgres => "postgres",
            StoreKind::MySql => "mysql",
        }
    }
}

impl FromStr for StoreKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "sqlite" => Ok(StoreKind::Sqlite),
            "postgres" => Ok(StoreKind::Postgres),
            "mysql" => Ok(StoreKind::MySql),
            other => Err(format!(
                "unknown store {other:?}; sqlite, postgres or mysql"
            )),
        }
    }
}

/// What every run shares: how many operations, on which databases.
#[derive(Debug, Clone)]
pub struct Config {
    /// Operations per measurement.
    pub ops: usize,
    /// The databases, in this order.
    pub stores: Vec<StoreKind>,
    /// SQLite pool size (1: one writer, queued in the pool).
    pub sqlite_connections: u32,
    /// The PostgreSQL server and the store's batching.
    pub pg: PgConfig,
    /// The MySQL or MariaDB server: `mysql://...`; the bench makes a
    /// database of its own there.
    pub mysql_url: String,
}

/// The PostgreSQL server to measure on and how the store batches.
#[derive(Debug, Clone)]
pub struct PgConfig {
    /// `postgres://...`; the bench makes a schema (or database) of its own.
    pub url: String,
    /// Claims or moves per batch statement at most (1: no batching).
    pub max_batch: usize,
    /// Batch statements in flight per kind (claims, moves).
    pub lanes: usize,
}

/// Where the bench's rows go as they are measured: the CLI prints them as
/// a table or as JSON lines.
pub trait Report {
    /// A guarded-operation row.
    fn guarded(&mut self, row: &GuardedRow) -> anyhow::Result<()>;
    /// A relay row.
    fn relay(&mut self, row: &RelayRow) -> anyhow::Result<()>;
    /// A scale-out row.
    fn scale(&mut self, row: &ScaleRow) -> anyhow::Result<()>;
    /// Something measured less than asked (a database unreachable, pgbench
    /// failing), in words.
    fn note(&mut self, note: &str);
}

/// Peak resident memory of this process (Linux VmHWM), in MiB; 0 where
/// the system does not say.
pub fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|kb| kb.parse::<f64>().ok())
            })
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// The PostgreSQL target, the store batching as `pg` says. Its pool (the
/// raw and minimal sqlx baselines, local effects) keeps 16 connections, so
/// that pgbench's 64 clients still fit under the server's default limit of
/// 100 connections.
async fn pg_target(pg: &PgConfig) -> anyhow::Result<targets::PgTarget> {
    let options = onceonly_postgres::PgOptions::default()
        .max_batch(pg.max_batch)
        .batch_lanes(pg.lanes);
    targets::PgTarget::new(&pg.url, 16, options).await
}

/// The MySQL target: a pool of 16 connections, as PostgreSQL's, for the
/// store and the raw and minimal sqlx baselines; mariadb-slap's 64 clients
/// still fit under the server's default limit of 151 connections.
async fn mysql_target(url: &str) -> anyhow::Result<targets::MySqlTarget> {
    targets::MySqlTarget::new(url, 16).await
}

/// Runs `measure` on each store of `config`: a PostgreSQL or MySQL that
/// cannot be reached is noted and skipped, and its schema (database) is
/// dropped afterwards.
macro_rules! on_each_store {
    ($config:expr, $report:expr, |$target:ident| $measure:expr) => {
        for store in &$config.stores {
            match store {
                $crate::StoreKind::Sqlite => {
                    let $target =
                        $crate::targets::SqliteTarget::new($config.sqlite_connections).await?;
                    $measure?;
                }
                $crate::StoreKind::Postgres => match $crate::pg_target(&$config.pg).await {
                    Ok($target) => {
                        let measured = $measure;
                        if let Err(e) = $target.drop_schema().await {
                            $report.note(&e);
                        }
                        measured?;
                    }
                    Err(e) => $report.note(&format!("PostgreSQL skipped: {e}")),
                },
                $crate::StoreKind::MySql => match $crate::mysql_target(&$config.mysql_url).await {
                    Ok($target) => {
                        let measured = $measure;
                        if let Err(e) = $target.drop_schema().await {
                            $report.note(&e);
                        }
                        measured?;
                    }
                    Err(e) => $report.note(&format!("MySQL skipped: {e}")),
                },
            }
        }
    };
}
use on_each_store;
