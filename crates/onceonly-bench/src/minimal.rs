//! The honest baseline on PostgreSQL: the least a guarded operation can do,
//! run raw. Insert the claim, then an owner-checked update to completed, each
//! committed on its own, on a table with only its primary key
//! (`pg-minimal-op.sql`, the peers' pgbench script in `../shared/bench/`).
//! Run by sqlx, the driver the store uses, and by pgbench when installed.

use std::time::Duration;

use anyhow::Context;
use sqlx::PgPool;

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

/// The minimal operation's table in the bench's schema, and how to run it.
pub struct Minimal {
    pool: PgPool,
    url: String,
    schema: String,
    insert: String,
    update: String,
}

impl Minimal {
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

/// The path of `program` on PATH, if any.
fn which(program: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(program))
            .find(|p| p.is_file())
    })
}
