//! The honest baseline: the least a guarded operation can do, run raw.
//! Insert the claim, then an owner-checked update to completed, each
//! committed on its own, on a table with only its primary key. Run by sqlx,
//! the driver the store uses, and by the database's standard load tool when
//! installed: on PostgreSQL pgbench (`pg-minimal-op.sql`, the peers' script
//! in `../shared/bench/`), on MySQL and MariaDB mariadb-slap
//! (`mysql-minimal-op.sql`).

use std::time::Duration;

use anyhow::Context;
use sqlx::{MySqlPool, PgPool};

/// The minimal operation on the bench's database.
pub enum Minimal {
    /// On PostgreSQL.
    Pg(PgMinimal),
    /// On MySQL or MariaDB.
    MySql(MySqlMinimal),
}

impl Minimal {
    /// One minimal operation through sqlx, each statement's count checked.
    pub async fn op(&self, key: &str) -> anyhow::Result<()> {
        match self {
            Minimal::Pg(m) => m.op(key).await,
            Minimal::MySql(m) => m.op(key).await,
        }
    }

    /// The load tool's name.
    pub fn tool(&self) -> &'static str {
        match self {
            Minimal::Pg(_) => "pgbench",
            Minimal::MySql(_) => "mariadb-slap",
        }
    }

    /// The load tool running the same two statements, `ops` operations over
    /// `clients` connections: operations per second. `None` when the tool
    /// is not installed.
    pub async fn load_tool(&self, clients: usize, ops: usize) -> anyhow::Result<Option<f64>> {
        match self {
            Minimal::Pg(m) => m.pgbench(clients, ops).await,
            Minimal::MySql(m) => m.slap(clients, ops).await,
        }
    }
}

/// The pgbench script, as the peers run it (`op_record` in the search path).
const PGBENCH_SCRIPT: &str = include_str!("pg-minimal-op.sql");

/// The table of `pg-minimal-op.sql`: its columns and only a primary key.
const TABLE: &str = "CREATE TABLE {t} (job_type text not null, op_key text not null,
    state text not null, owner text, token bigint not null default 1, claimed_at timestamptz,
    lease_until timestamptz, completed_at timestamptz, external_ref text, result jsonb,
    primary key(job_type, op_key))";

/// The script's two statements, with its variables bound (`$1` key, `$2` owner).
const INSERT: &str = "INSERT INTO {t}(job_type, op_key, state, owner, claimed_at, lease_until) \
    VALUES ('send_email', $1, 'claimed', $2, now(), now() + interval '60 s') ON CONFLICT DO NOTHING";
const UPDATE: &str = "UPDATE {t} SET state='completed', completed_at=now(), external_ref='x' \
    WHERE job_type='send_email' AND op_key = $1 AND state='claimed' AND owner=$2 AND token=1";

/// The minimal operation's table in the bench's PostgreSQL schema, and how
/// to run it.
pub struct PgMinimal {
    pool: PgPool,
    url: String,
    schema: String,
    insert: String,
    update: String,
}

impl PgMinimal {
    /// Creates `op_record` in `schema` (dropped with it).
    pub async fn new(pool: &PgPool, url: &str, schema: &str) -> anyhow::Result<Self> {
        let table = format!("\"{schema}\".op_record");
        sqlx::query(&TABLE.replace("{t}", &table))
            .execute(pool)
            .await?;
        Ok(Self {
            pool: pool.clone(),
            url: url.to_owned(),
            schema: schema.to_owned(),
            insert: INSERT.replace("{t}", &table),
            update: UPDATE.replace("{t}", &table),
        })
    }

    /// One minimal operation through sqlx, each statement's count checked.
    pub async fn op(&self, key: &str) -> anyhow::Result<()> {
        let owner = "w";
        let inserted = sqlx::query(&self.insert)
            .bind(key)
            .bind(owner)
            .execute(&self.pool)
            .await?
            .rows_affected();
        anyhow::ensure!(inserted == 1, "minimal claim of {key} inserted {inserted}");
        let done = sqlx::query(&self.update)
            .bind(key)
            .bind(owner)
            .execute(&self.pool)
            .await?
            .rows_affected();
        anyhow::ensure!(done == 1, "minimal completion of {key} changed {done}");
        Ok(())
    }

    /// pgbench running the script, `ops` operations over `clients`
    /// connections: its tps (one transaction = one operation). `None` when
    /// pgbench is not installed.
    pub async fn pgbench(&self, clients: usize, ops: usize) -> anyhow::Result<Option<f64>> {
        if which("pgbench").is_none() {
            return Ok(None);
        }
        let url = url::Url::parse(&self.url).context("the PostgreSQL URL")?;
        let script = tempfile::Builder::new().suffix(".sql").tempfile()?;
        std::fs::write(script.path(), PGBENCH_SCRIPT)?;
        let clients = clients.max(1);
        let per_client = ops.div_ceil(clients).max(1);
        let mut cmd = tokio::process::Command::new("pgbench");
        cmd.args(["-n", "-M", "prepared", "-c", &clients.to_string()])
            .args(["-j", &clients.min(2).to_string()])
            .args(["-t", &per_client.to_string(), "-f"])
            .arg(script.path())
            .args(["-h", url.host_str().unwrap_or("127.0.0.1")])
            .args(["-p", &url.port().unwrap_or(5432).to_string()])
            .args([
                "-U",
                if url.username().is_empty() {
                    "postgres"
                } else {
                    url.username()
                },
            ])
            .arg(url.path().trim_start_matches('/'))
            // The script names op_record unqualified: this schema first.
            .env("PGOPTIONS", format!("-c search_path={}", self.schema))
            .kill_on_drop(true);
        if let Some(password) = url.password() {
            cmd.env("PGPASSWORD", password);
        }
        let out = tokio::time::timeout(Duration::from_secs(600), cmd.output())
            .await
            .context("pgbench ran over 10 minutes")??;
        let stdout = String::from_utf8_lossy(&out.stdout);
        anyhow::ensure!(
            out.status.success(),
            "pgbench failed: {}{}",
            stdout,
            String::from_utf8_lossy(&out.stderr)
        );
        let tps = stdout
            .lines()
            .find_map(|l| l.strip_prefix("tps = "))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse::<f64>().ok())
            .with_context(|| format!("no tps in pgbench's output: {stdout}"))?;
        Ok(Some(tps))
    }
}

/// mariadb-slap's queries: the same two statements, the key a fresh UUID
/// kept in a session variable from the claim to its completion.
const SLAP_QUERY: &str = include_str!("mysql-minimal-op.sql");

/// The table of `mysql-minimal-op.sql`: the PostgreSQL table's columns in
/// MySQL's types, the key compared bytewise as onceonly's is.
const MYSQL_TABLE: &str = "CREATE TABLE op_record (
    job_type VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
    op_key VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
    state VARCHAR(16) NOT NULL, owner VARCHAR(64), token BIGINT NOT NULL DEFAULT 1,
    claimed_at DATETIME(6), lease_until DATETIME(6), completed_at DATETIME(6),
    external_ref LONGTEXT, result LONGTEXT, PRIMARY KEY (job_type, op_key)) ENGINE=InnoDB";

/// The two statements, with the key (`?`) and owner (`?`) bound.
const MYSQL_INSERT: &str = "INSERT INTO op_record(job_type, op_key, state, owner, claimed_at, \
    lease_until) VALUES ('send_email', ?, 'claimed', ?, NOW(6), NOW(6) + INTERVAL 60 SECOND)";
const MYSQL_UPDATE: &str = "UPDATE op_record SET state='completed', completed_at=NOW(6), \
    external_ref='x' WHERE job_type='send_email' AND op_key = ? AND state='claimed' \
    AND owner = ? AND token=1";

/// The minimal operation's table in the bench's MySQL database.
pub struct MySqlMinimal {
    pool: MySqlPool,
    url: String,
    database: String,
}

impl MySqlMinimal {
    /// Creates `op_record` in the pool's database, `database` (dropped with it).
    pub async fn new(pool: &MySqlPool, url: &str, database: &str) -> anyhow::Result<Self> {
        sqlx::query(MYSQL_TABLE).execute(pool).await?;
        Ok(Self {
            pool: pool.clone(),
            url: url.to_owned(),
            database: database.to_owned(),
        })
    }

    /// One minimal operation through sqlx, each statement's count checked.
    pub async fn op(&self, key: &str) -> anyhow::Result<()> {
        let owner = "w";
        let inserted = sqlx::query(MYSQL_INSERT)
            .bind(key)
            .bind(owner)
            .execute(&self.pool)
            .await?
            .rows_affected();
        anyhow::ensure!(inserted == 1, "minimal claim of {key} inserted {inserted}");
        let done = sqlx::query(MYSQL_UPDATE)
            .bind(key)
            .bind(owner)
            .execute(&self.pool)
            .await?
            .rows_affected();
        anyhow::ensure!(done == 1, "minimal completion of {key} changed {done}");
        Ok(())
    }

    /// mariadb-slap (or mysqlslap) running the two statements, `ops`
    /// operations over `clients` connections: operations per second. The
    /// tool checks no counts, so the rows it completed are counted after.
    pub async fn slap(&self, clients: usize, ops: usize) -> anyhow::Result<Option<f64>> {
        let Some(program) = ["mariadb-slap", "mysqlslap"]
            .into_iter()
            .find(|p| which(p).is_some())
        else {
            return Ok(None);
        };
        let url = url::Url::parse(&self.url).context("the MySQL URL")?;
        let clients = clients.max(1);
        let per_client = ops.div_ceil(clients).max(1);
        let ops = per_client * clients;
        let completed = || async {
            sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM op_record WHERE state = 'completed'")
                .fetch_one(&self.pool)
                .await
        };
        let before = completed().await?;
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(["-h", url.host_str().unwrap_or("127.0.0.1")])
            .arg(format!("--port={}", url.port().unwrap_or(3306)))
            .args([
                "-u",
                if url.username().is_empty() {
                    "root"
                } else {
                    url.username()
                },
            ])
            // Runs in the bench's database, which it neither creates nor drops.
            .arg(format!("--create-schema={}", self.database))
            .args(["--no-drop", "--iterations=1", "--delimiter=;"])
            .arg(format!("--concurrency={clients}"))
            // Statements in all: two per operation.
            .arg(format!("--number-of-queries={}", 2 * ops))
            .arg(format!("--query={}", SLAP_QUERY.trim()))
            .kill_on_drop(true);
        if let Some(password) = url.password() {
            cmd.env("MYSQL_PWD", password);
        }
        let out = tokio::time::timeout(Duration::from_secs(600), cmd.output())
            .await
            .with_context(|| format!("{program} ran over 10 minutes"))??;
        let stdout = String::from_utf8_lossy(&out.stdout);
        anyhow::ensure!(
            out.status.success(),
            "{program} failed: {}{}",
            stdout,
            String::from_utf8_lossy(&out.stderr)
        );
        let seconds = stdout
            .lines()
            .find_map(|l| {
                l.trim()
                    .strip_prefix("Average number of seconds to run all queries: ")
            })
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse::<f64>().ok())
            .with_context(|| format!("no time in {program}'s output: {stdout}"))?;
        let done = completed().await? - before;
        anyhow::ensure!(
            done == ops as i64,
            "{program} completed {done} of {ops} operations"
        );
        Ok(Some(ops as f64 / seconds.max(0.001)))
    }
}

/// The path of `program` on PATH, if any.
fn which(program: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(program))
            .find(|p| p.is_file())
    })
}
