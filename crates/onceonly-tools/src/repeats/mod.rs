//! Past repeats in the user's own table: every key with more than one row,
//! its count, first and last time, the gaps, and the pattern they show (see
//! [`pattern`]). Read-only: SQLite is opened read-only, PostgreSQL and
//! MySQL are read in a READ ONLY transaction. The SQL run is kept
//! ([`Report::sql_note`]) so the user can run it themselves.

pub mod pattern;
pub mod sql;
pub mod time;

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context;
use serde::Serialize;

use onceonly::db_url::DbKind;
use pattern::{classify, Pattern, Windows};
use sql::Plan;
use time::Millis;

/// What to look for repeats in.
#[derive(Debug, Clone)]
pub struct Request {
    /// The table (or view) holding one row per effect: a plain identifier,
    /// or schema.table on PostgreSQL (database.table on MySQL).
    pub table: String,
    /// The column holding the business operation's key.
    pub key: String,
    /// The column holding when the row was written.
    pub at: String,
    /// Deploy times, sorted (see [`read_deploys`]).
    pub deploys: Vec<Millis>,
    /// Gaps under this are retries; a longer one is a re-enqueue.
    pub retry_window: Duration,
    /// A repeat this close to a deploy (before or after it) is the deploy's.
    pub deploy_window: Duration,
}

/// One repeated key.
#[derive(Debug, Clone, Serialize)]
pub struct Repeat {
    /// The key.
    pub key: String,
    /// Rows with it.
    pub count: usize,
    /// The first row's time.
    pub first_at: String,
    /// The last row's time.
    pub last_at: String,
    /// Gaps between consecutive rows, in seconds.
    pub gaps_s: Vec<f64>,
    /// What the gaps show.
    pub pattern: Pattern,
    /// For `deploy`: the deploy the repeat was near.
    pub deploy_at: Option<String>,
    /// The first row's time, ms.
    #[serde(skip)]
    pub first_ms: Millis,
    /// The gaps, ms.
    #[serde(skip)]
    pub gaps_ms: Vec<Millis>,
}

/// The report: the SQL to run, and once run, the repeats, oldest first.
#[derive(Debug, Clone)]
pub struct Report {
    /// The SQL, with a line saying how it was run.
    pub sql_note: String,
    /// Every repeated key, by its first row's time.
    pub repeats: Vec<Repeat>,
}

/// The statements [`find`] runs, checked (identifiers only) and quoted, and
/// the note printed with them.
pub fn sql_note(db: &str, r: &Request) -> anyhow::Result<(Plan, String)> {
    let backend = DbKind::of(db)?;
    let plan = Plan::new(backend, &r.table, &r.key, &r.at)?;
    let script = plan.script();
    let note = format!(
        "-- the SQL run ({}), to run yourself:\n{script}",
        match backend {
            DbKind::Sqlite => "on a read-only connection",
            DbKind::Postgres | DbKind::MySql => "in a read-only transaction",
        }
    );
    Ok((plan, note))
}

/// Runs the report on the database at `db`.
pub async fn find(db: &str, r: &Request) -> anyhow::Result<Report> {
    let (plan, sql_note) = self::sql_note(db, r)?;
    let rows = plan.run(db).await?;
    let windows = Windows {
        retry: millis(r.retry_window),
        deploy: millis(r.deploy_window),
    };
    let mut by_key: BTreeMap<String, Vec<Millis>> = BTreeMap::new();
    for row in rows {
        let at = row.at.millis().map_err(|why| {
            anyhow::anyhow!(
                "key {:?}, column {}: {why}; repeats reads ISO 8601 text, Unix seconds \
                 or a native timestamp",
                row.key,
                r.at
            )
        })?;
        by_key.entry(row.key).or_default().push(at);
    }
    let mut repeats: Vec<Repeat> = by_key
        .into_iter()
        .map(|(key, mut times)| {
            times.sort_unstable();
            let c = classify(&times, &r.deploys, windows);
            Repeat {
                key,
                count: times.len(),
                first_at: time::format(times[0]),
                last_at: time::format(*times.last().expect("two rows or more")),
                gaps_s: c.gaps.iter().map(|&g| g as f64 / 1000.0).collect(),
                pattern: c.pattern,
                deploy_at: c.deploy_at.map(time::format),
                first_ms: times[0],
                gaps_ms: c.gaps,
            }
        })
        .collect();
    repeats.sort_by(|a, b| (a.first_ms, &a.key).cmp(&(b.first_ms, &b.key)));
    Ok(Report { sql_note, repeats })
}

fn millis(d: Duration) -> Millis {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Reads a deploys file: one ISO 8601 time per line (blank lines and lines
/// starting with # skipped), sorted on return.
pub fn read_deploys(path: &std::path::Path) -> anyhow::Result<Vec<Millis>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the deploys file {}", path.display()))?;
    let mut deploys = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let t = time::parse(line)
            .map_err(|why| anyhow::anyhow!("{}:{}: {why}", path.display(), n + 1))?;
        deploys.push(t);
    }
    deploys.sort_unstable();
    Ok(deploys)
}

/// "3 keys repeated, 5 rows beyond the first: 1 retry, 1 re-enqueue, 1 deploy".
pub fn summary(repeats: &[Repeat]) -> String {
    let extra: usize = repeats.iter().map(|r| r.count - 1).sum();
    let per: Vec<String> = Pattern::ALL
        .iter()
        .map(|p| {
            let n = repeats.iter().filter(|r| r.pattern == *p).count();
            format!("{n} {p}")
        })
        .collect();
    format!(
        "{} keys repeated, {extra} rows beyond the first: {}",
        repeats.len(),
        per.join(", ")
    )
}
