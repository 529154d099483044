//! `onceonly bench`: parses its flags, runs the matching measurement of
//! `onceonly-bench` and prints each row as a table line or a JSON object.

use std::process::ExitCode;

use onceonly::db_url::DbKind;
use onceonly_bench::{
    Config, GuardedOptions, GuardedRow, PgConfig, RelayOptions, RelayRow, Report, ScaleOptions,
    ScaleRow, StoreKind,
};

/// Arguments of `onceonly bench`.
#[derive(clap::Args)]
pub struct Args {
    /// Operations per measurement.
    #[arg(long, default_value_t = 20_000)]
    ops: usize,
    /// PostgreSQL to measure on (a fresh schema, dropped afterwards); the
    /// global --db is used when it is a postgres:// URL.
    #[arg(
        long,
        env = "ONCEONLY_BENCH_PG",
        hide_env_values = true,
        default_value = "postgres://postgres@127.0.0.1:5432/test"
    )]
    pg: String,
    /// MySQL or MariaDB to measure on (a fresh database, dropped
    /// afterwards); the global --db is used when it is a mysql:// URL.
    #[arg(
        long,
        env = "ONCEONLY_BENCH_MYSQL",
        hide_env_values = true,
        default_value = "mysql://root@127.0.0.1:3306/test"
    )]
    mysql: String,
    /// One JSON object per line instead of a table.
    #[arg(long)]
    json: bool,
    /// Only these stores (sqlite, postgres, mysql).
    #[arg(long, value_delimiter = ',', default_value = "sqlite,postgres")]
    stores: Vec<String>,
    /// Only these effects (keyed, local).
    #[arg(long, value_delimiter = ',', default_value = "keyed,local")]
    effects: Vec<String>,
    /// Only these concurrencies.
    #[arg(long, value_delimiter = ',', default_value = "1,16")]
    concurrency: Vec<usize>,
    /// SQLite pool size (1: one writer, queued in the pool).
    #[arg(long, default_value_t = 1)]
    sqlite_connections: u32,
    /// Measure the relay draining a queue instead (batched and not).
    #[arg(long)]
    relay: bool,
    /// Relay batch sizes to measure (1 = no batching).
    #[arg(long, value_delimiter = ',', default_value = "1,500")]
    batches: Vec<u32>,
    /// Relay destinations to measure (noop, http, https).
    #[arg(long, value_delimiter = ',', default_value = "noop,http")]
    destinations: Vec<String>,
    /// Concurrent claim loops of the relay and of its raw baseline (with
    /// --relay-processes: of each process).
    #[arg(long, default_value_t = 4)]
    relay_workers: usize,
    /// With --relay: scale-out instead. N `onceonly run --drain` processes
    /// on one PostgreSQL database, for each N given (1 is always measured,
    /// as the baseline), into a destination that counts every request.
    #[arg(long, value_delimiter = ',', requires = "relay", value_name = "N,...")]
    relay_processes: Vec<usize>,
    /// PostgreSQL: claims or moves per batch statement at most (1: no batching).
    #[arg(long, default_value_t = onceonly_postgres::DEFAULT_MAX_BATCH)]
    pg_max_batch: usize,
    /// PostgreSQL: batch statements in flight per kind (claims, moves).
    #[arg(long, default_value_t = onceonly_postgres::DEFAULT_BATCH_LANES)]
    pg_lanes: usize,
    /// PostgreSQL and MySQL keyed rows: skip the minimal operation's baselines.
    #[arg(long)]
    no_minimal: bool,
}

/// Runs the measurements `args` ask for and prints them.
pub async fn run(db: &str, args: Args) -> anyhow::Result<ExitCode> {
    // --db names the PostgreSQL or MySQL to use when it is one; --pg and
    // --mysql otherwise.
    let (pg_url, mysql_url) = match DbKind::of(db)? {
        DbKind::Postgres => (db.to_owned(), args.mysql.clone()),
        DbKind::MySql => (args.pg.clone(), db.to_owned()),
        DbKind::Sqlite => (args.pg.clone(), args.mysql.clone()),
    };
    let config = Config {
        ops: args.ops,
        stores: args
            .stores
            .iter()
            .map(|s| s.parse::<StoreKind>())
            .collect::<Result<_, String>>()
            .map_err(|e| anyhow::anyhow!("--stores: {e}"))?,
        sqlite_connections: args.sqlite_connections,
        pg: PgConfig {
            url: pg_url,
            max_batch: args.pg_max_batch,
            lanes: args.pg_lanes,
        },
        mysql_url,
    };
    let mut printer = Printer {
        json: args.json,
        relay_header_for: None,
    };
    if !args.relay_processes.is_empty() {
        let options = ScaleOptions {
            program: std::env::current_exe()?,
            processes: args.relay_processes,
            batches: args.batches,
            workers: args.relay_workers,
        };
        if !args.json {
            print_scale_header();
        }
        onceonly_bench::scale_out(&config, &options, &mut printer).await?;
    } else if args.relay {
        let options = RelayOptions {
            batches: args.batches,
            destinations: args.destinations,
            workers: args.relay_workers,
        };
        options
            .check()
            .map_err(|e| anyhow::anyhow!("--destinations: {e}"))?;
        onceonly_bench::relay(&config, &options, &mut printer).await?;
    } else {
        if let Some(other) = args
            .effects
            .iter()
            .find(|e| !matches!(e.as_str(), "keyed" | "local"))
        {
            anyhow::bail!("--effects: unknown effect {other:?}; keyed or local");
        }
        let options = GuardedOptions {
            effects: args.effects,
            concurrency: args.concurrency,
            minimal: !args.no_minimal,
        };
        if !args.json {
            print_guarded_header();
        }
        onceonly_bench::guarded(&config, &options, &mut printer).await?;
    }
    let peak = onceonly_bench::peak_rss_mib();
    if args.json && !args.relay {
        println!("{}", serde_json::json!({ "peak_rss_mib": peak }));
    } else {
        println!("peak memory (VmHWM): {peak:.1} MiB");
    }
    Ok(ExitCode::SUCCESS)
}

/// Prints rows as they come: a table (a relay header before each store's
/// first row) or one JSON object per line. Notes go to stderr.
struct Printer {
    json: bool,
    relay_header_for: Option<&'static str>,
}

impl Report for Printer {
    fn guarded(&mut self, row: &GuardedRow) -> anyhow::Result<()> {
        if self.json {
            println!("{}", serde_json::to_string(row)?);
        } else {
            print_guarded_row(row);
        }
        Ok(())
    }

    fn relay(&mut self, row: &RelayRow) -> anyhow::Result<()> {
        if self.json {
            println!("{}", serde_json::to_string(row)?);
            return Ok(());
        }
        if self.relay_header_for != Some(row.store) {
            self.relay_header_for = Some(row.store);
            print_relay_header();
        }
        println!(
            "{:<9} {:<6} {:>5} {:>3} {:>7} {:>10.0} {:>9.1} {:>9.1} {:>10.1} {:>10.1} {:>10.0} {:>6.2}",
            row.store, row.destination, row.batch, row.workers, row.ops, row.ops_per_s,
            row.claim_to_done_p50_ms, row.claim_to_done_p99_ms, row.enqueue_to_done_p50_ms,
            row.enqueue_to_done_p99_ms, row.raw_ops_per_s, row.ratio
        );
        Ok(())
    }

    fn scale(&mut self, row: &ScaleRow) -> anyhow::Result<()> {
        if self.json {
            println!("{}", serde_json::to_string(row)?);
        } else {
            println!(
                "{:<9} {:>5} {:>5} {:>3} {:>7} {:>10.0} {:>7.1} {:>8} {:>8} {:>6} {:>7} {:>10.0} {:>6.2}",
                row.store, row.processes, row.batch, row.workers, row.ops, row.ops_per_s,
                row.wall_s, row.posts, row.keys_received, row.keys_sent_twice, row.keys_missing,
                row.baseline_ops_per_s, row.ratio
            );
        }
        Ok(())
    }

    fn note(&mut self, note: &str) {
        eprintln!("bench: {note}");
    }
}

fn print_guarded_header() {
    println!(
        "{:<9} {:<6} {:>4} {:>11} {:>8} {:>8} {:>11} {:>8} {:>8} {:>6} {:>10} {:>10} {:>7} {:>6}",
        "store",
        "effect",
        "conc",
        "guarded/s",
        "p50 ms",
        "p99 ms",
        "raw/s",
        "p50 ms",
        "p99 ms",
        "ratio",
        "minimal/s",
        "tool/s",
        "vs tool",
        "batch"
    );
}

fn print_guarded_row(r: &GuardedRow) {
    let or_dash =
        |v: Option<f64>, digits: usize| v.map_or("-".to_owned(), |v| format!("{v:.digits$}"));
    println!(
        "{:<9} {:<6} {:>4} {:>11.0} {:>8.3} {:>8.3} {:>11.0} {:>8.3} {:>8.3} {:>6.2} {:>10} {:>10} {:>7} {:>6}",
        r.store,
        r.effect,
        r.concurrency,
        r.ops_per_s,
        r.p50_ms,
        r.p99_ms,
        r.raw_ops_per_s,
        r.raw_p50_ms,
        r.raw_p99_ms,
        r.ratio,
        or_dash(r.minimal_ops_per_s, 0),
        or_dash(r.load_tool_ops_per_s, 0),
        or_dash(r.vs_load_tool, 2),
        or_dash(r.calls_per_batch, 1)
    );
}

fn print_relay_header() {
    println!(
        "{:<9} {:<6} {:>5} {:>3} {:>7} {:>10} {:>9} {:>9} {:>10} {:>10} {:>10} {:>6}",
        "store",
        "dest",
        "batch",
        "wk",
        "ops",
        "relay/s",
        "c→d p50",
        "c→d p99",
        "e→d p50",
        "e→d p99",
        "raw/s",
        "ratio"
    );
}

fn print_scale_header() {
    println!(
        "{:<9} {:>5} {:>5} {:>3} {:>7} {:>10} {:>7} {:>8} {:>8} {:>6} {:>7} {:>10} {:>6}",
        "store",
        "procs",
        "batch",
        "wk",
        "ops",
        "relay/s",
        "wall s",
        "posts",
        "keys",
        "twice",
        "missing",
        "1 proc/s",
        "ratio"
    );
}
