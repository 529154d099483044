//! The databases the bench runs on, each with its raw baseline: the store's
//! own claim and completion SQL, bound the same way, run straight on a
//! connection, on the driver the guard uses for that effect (SQLite keyed:
//! rusqlite, like the store's own connection; local effects: sqlx, the
//! user's transaction; PostgreSQL and MySQL: sqlx).
//!
//! The statements are the store crates' own files, read here at compile
//! time as `tools/sync-sql` copies them for the Python and Ruby clients:
//! the store crates export no SQL text for the bench. The completion's
//! from-state, to-state and cancel fence come from the protocol
//! ([`Move::Complete`]), as the store's own completion does.

use std::future::Future;

use onceonly::store::OpMove;
use onceonly::{BoxError, EffectCtx, Move, Payload, Store};
use onceonly_mysql::{MySqlOptions, MySqlStore};
use onceonly_postgres::{PgOptions, PgStore};
use onceonly_sqlite::SqliteStore;
use sqlx::{Connection, Row};

use crate::minimal::{Minimal, MySqlMinimal, PgMinimal};

/// SQLite's statements (see `crates/onceonly-sqlite/queries/`).
mod sqlite_sql {
    /// Claim: insert claimed, or claim a queued row.
    pub const CLAIM: &str = include_str!("../../onceonly-sqlite/queries/claim.sql");
    /// Claim a new record: a plain insert, the clock bound as `?8`; what
    /// the store runs first.
    pub const CLAIM_NEW: &str = include_str!("../../onceonly-sqlite/queries/claim_new.sql");
    /// One fenced transition.
    pub const MOVE: &str = include_str!("../../onceonly-sqlite/queries/move.sql");
}

/// PostgreSQL's statements (see `crates/onceonly-postgres/queries/`), in
/// the schema `onceonly` until [`onceonly_postgres::sql::in_schema`] puts
/// the bench's in its place.
mod pg_sql {
    /// Claim: insert claimed, or claim a queued row.
    pub const CLAIM: &str = include_str!("../../onceonly-postgres/queries/claim.sql");
    /// One fenced transition.
    pub const MOVE: &str = include_str!("../../onceonly-postgres/queries/move.sql");
}

/// MySQL's statements (see `crates/onceonly-mysql/queries/`): a new claim
/// is the clock read, then the insert; a completion is the fenced move.
mod mysql_sql {
    /// The database's clock in ms.
    pub const NOW: &str = include_str!("../../onceonly-mysql/queries/now.sql");
    /// Insert the record claimed at the clock read.
    pub const CLAIM_INSERT: &str = include_str!("../../onceonly-mysql/queries/claim_insert.sql");
    /// One fenced transition.
    pub const MOVE: &str = include_str!("../../onceonly-mysql/queries/move.sql");
}

/// SQLite's clock in ms, as the store binds it to `CLAIM_NEW`:
/// `unixepoch('subsec')` reads this same wall clock, truncated to the
/// millisecond the same way.
fn sqlite_clock_ms() -> i64 {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since_epoch.as_millis()).unwrap_or(i64::MAX)
}

/// `claim.sql` on sqlx (either store's: they take the same parameters) as
/// the store binds it for a new operation with no payload: clock offset 0,
/// owner `bench`, a lease of [`LEASE_MS`].
fn bind_claim<'q, DB: sqlx::Database>(
    query: sqlx::query::Query<'q, DB, DB::Arguments<'q>>,
    key: &'q str,
) -> sqlx::query::Query<'q, DB, DB::Arguments<'q>>
where
    i64: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    &'q str: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    String: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    Option<String>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
{
    query
        .bind(0_i64)
        .bind("bench_raw")
        .bind(key)
        .bind("bench")
        .bind(Payload::none().fingerprint)
        .bind(None::<String>)
        .bind(LEASE_MS)
}

/// The completion the raw baselines run: the protocol's, recording `null`.
fn completion<'a>(job_type: &'a str, key: &'a str, token: i64) -> OpMove<'a> {
    Move::Complete.op(job_type, key, token).with_result("null")
}

/// [`completion`] bound to `move.sql` on sqlx (either store's: they take
/// the same parameters) as the store binds it: clock offset 0, no retry
/// delay.
fn bind_completion<'q, DB: sqlx::Database>(
    query: sqlx::query::Query<'q, DB, DB::Arguments<'q>>,
    key: &'q str,
    token: i64,
) -> sqlx::query::Query<'q, DB, DB::Arguments<'q>>
where
    i64: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    bool: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    &'q str: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    Option<&'q str>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
{
    let m = completion("bench_raw", key, token);
    query
        .bind(0_i64)
        .bind(m.job_type)
        .bind(m.op_key)
        .bind(m.token)
        .bind(m.from.as_str())
        .bind(m.to.as_str())
        .bind(m.external_ref)
        .bind(m.result)
        .bind(m.error)
        .bind(m.unless_cancel_requested)
        .bind(0_i64)
}

const LEASE_MS: i64 = 30_000;

/// A database to measure on.
pub trait BenchTarget: Sync {
    /// Name in the report.
    const NAME: &'static str;
    /// The store.
    type S: Store + Clone;
    /// The store the guard uses.
    fn store(&self) -> &Self::S;
    /// Claim then complete, as raw SQL.
    fn raw_keyed(&self, key: &str) -> impl Future<Output = anyhow::Result<()>> + Send;
    /// One transaction: claim, insert the effect row, complete, commit.
    fn raw_local(&self, key: &str) -> impl Future<Output = anyhow::Result<()>> + Send;
    /// Refreshes the planner's statistics after a bulk enqueue, as autovacuum
    /// would on a long-lived table.
    fn analyze(&self) -> impl Future<Output = anyhow::Result<()>> + Send;
    /// The statement that inserts one row in the user's table (`$1`/`?1`: the key).
    fn effect_sql(&self) -> String;
    /// What the store's batcher did so far (PostgreSQL only).
    fn batch_stats(&self) -> Option<onceonly_postgres::BatchStats> {
        None
    }
    /// The minimal two-statement operation, run raw (PostgreSQL only).
    fn minimal(&self) -> Option<&Minimal> {
        None
    }
    /// The local effect: runs `sql` for the operation's key.
    fn insert_effect<'c>(
        sql: String,
        conn: &'c mut <Self::S as Store>::Conn,
        ctx: &'c EffectCtx,
    ) -> impl Future<Output = Result<serde_json::Value, BoxError>> + Send + 'c;
}

/// SQLite on a fresh temporary file.
pub struct SqliteTarget {
    store: SqliteStore,
    /// The raw keyed baseline's connection: statements run inline, one
    /// autocommit each, the fastest way to run them by hand.
    raw: std::sync::Mutex<rusqlite::Connection>,
    _dir: tempfile::TempDir,
}

impl SqliteTarget {
    /// A fresh file, migrated, with the local effect's table.
    pub async fn new(connections: u32) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let url = format!("sqlite://{}", dir.path().join("bench.db").display());
        let store = SqliteStore::connect_with(&url, connections).await?;
        store.migrate().await?;
        sqlx::query("CREATE TABLE bench_effects (op_key TEXT PRIMARY KEY)")
            .execute(store.pool())
            .await?;
        let raw = rusqlite::Connection::open(dir.path().join("bench.db"))?;
        raw.busy_timeout(std::time::Duration::from_secs(30))?;
        raw.pragma_update(None, "synchronous", "NORMAL")?;
        Ok(Self {
            store,
            raw: std::sync::Mutex::new(raw),
            _dir: dir,
        })
    }
}

impl BenchTarget for SqliteTarget {
    const NAME: &'static str = "sqlite";
    type S = SqliteStore;

    fn store(&self) -> &SqliteStore {
        &self.store
    }

    async fn raw_keyed(&self, key: &str) -> anyhow::Result<()> {
        let raw = self.raw.lock().expect("a raw baseline panicked");
        let none = Payload::none();
        // The store's first statement for a new operation: the insert, with
        // SQLite's clock bound (a new record's token is 1).
        let inserted = raw
            .prepare_cached(sqlite_sql::CLAIM_NEW)?
            .execute(rusqlite::params![
                0_i64,
                "bench_raw",
                key,
                "bench",
                &none.fingerprint,
                None::<String>,
                LEASE_MS,
                sqlite_clock_ms()
            ])?;
        anyhow::ensure!(inserted == 1, "raw claim of {key} inserted {inserted} rows");
        let m = completion("bench_raw", key, 1);
        let done = raw
            .prepare_cached(sqlite_sql::MOVE)?
            .execute(rusqlite::params![
                0_i64,
                m.job_type,
                m.op_key,
                m.token,
                m.from.as_str(),
                m.to.as_str(),
                m.external_ref,
                m.result,
                m.error,
                m.unless_cancel_requested,
                0_i64
            ])?;
        anyhow::ensure!(done == 1, "raw completion of {key} changed {done} rows");
        Ok(())
    }

    async fn raw_local(&self, key: &str) -> anyhow::Result<()> {
        let mut tx = self.store.pool().begin_with("BEGIN IMMEDIATE").await?;
        let token = sqlite_claim(&mut *tx, key).await?;
        sqlx::query(&self.effect_sql())
            .bind(key)
            .execute(&mut *tx)
            .await?;
        let done = sqlite_complete(&mut *tx, key, token).await?;
        anyhow::ensure!(done == 1, "raw completion of {key} changed {done} rows");
        tx.commit().await?;
        Ok(())
    }

    async fn analyze(&self) -> anyhow::Result<()> {
        sqlx::query("ANALYZE").execute(self.store.pool()).await?;
        Ok(())
    }

    fn effect_sql(&self) -> String {
        "INSERT INTO bench_effects (op_key) VALUES (?1)".into()
    }

    async fn insert_effect<'c>(
        sql: String,
        conn: &'c mut sqlx::SqliteConnection,
        ctx: &'c EffectCtx,
    ) -> Result<serde_json::Value, BoxError> {
        sqlx::query(&sql).bind(&ctx.op_key).execute(conn).await?;
        Ok(serde_json::Value::Null)
    }
}

async fn sqlite_claim<'e>(
    ex: impl sqlx::Executor<'e, Database = sqlx::Sqlite>,
    key: &str,
) -> anyhow::Result<i64> {
    let row = bind_claim(sqlx::query(sqlite_sql::CLAIM), key)
        .fetch_one(ex)
        .await?;
    Ok(row.try_get("token")?)
}

async fn sqlite_complete<'e>(
    ex: impl sqlx::Executor<'e, Database = sqlx::Sqlite>,
    key: &str,
    token: i64,
) -> anyhow::Result<u64> {
    let done = bind_completion(sqlx::query(sqlite_sql::MOVE), key, token)
        .execute(ex)
        .await?;
    Ok(done.rows_affected())
}

/// PostgreSQL in a fresh schema, dropped afterwards.
pub struct PgTarget {
    store: PgStore,
    minimal: Minimal,
    schema: String,
    claim_sql: String,
    move_sql: String,
    insert_sql: String,
}

impl PgTarget {
    /// A fresh schema; the pool holds up to `connections` (the raw
    /// baselines run on it; the guard's keyed calls on the store's lanes).
    pub async fn new(url: &str, connections: u32, options: PgOptions) -> anyhow::Result<Self> {
        let schema = format!("bench_{}", std::process::id());
        let store =
            PgStore::connect_with(url, options.schema(&schema).max_connections(connections))
                .await?;
        store.migrate().await?;
        sqlx::query(&format!(
            "CREATE TABLE \"{schema}\".bench_effects (op_key TEXT PRIMARY KEY)"
        ))
        .execute(store.pool())
        .await?;
        Ok(Self {
            minimal: Minimal::Pg(PgMinimal::new(store.pool(), url, &schema).await?),
            claim_sql: onceonly_postgres::sql::in_schema(pg_sql::CLAIM, &schema),
            move_sql: onceonly_postgres::sql::in_schema(pg_sql::MOVE, &schema),
            insert_sql: format!("INSERT INTO \"{schema}\".bench_effects (op_key) VALUES ($1)"),
            store,
            schema,
        })
    }

    /// Drops the bench's schema, or says why it could not.
    pub async fn drop_schema(&self) -> Result<(), String> {
        let drop = format!("DROP SCHEMA \"{}\" CASCADE", self.schema);
        match sqlx::query(&drop).execute(self.store.pool()).await {
            Ok(_) => Ok(()),
            Err(e) => Err(format!("could not drop schema {}: {e}", self.schema)),
        }
    }

    async fn claim<'e>(
        &self,
        ex: impl sqlx::Executor<'e, Database = sqlx::Postgres>,
        key: &str,
    ) -> anyhow::Result<i64> {
        let row = bind_claim(sqlx::query(&self.claim_sql), key)
            .fetch_one(ex)
            .await?;
        Ok(row.try_get("token")?)
    }

    async fn complete<'e>(
        &self,
        ex: impl sqlx::Executor<'e, Database = sqlx::Postgres>,
        key: &str,
        token: i64,
    ) -> anyhow::Result<u64> {
        let done = bind_completion(sqlx::query(&self.move_sql), key, token)
            .execute(ex)
            .await?;
        Ok(done.rows_affected())
    }
}

impl BenchTarget for PgTarget {
    const NAME: &'static str = "postgres";
    type S = PgStore;

    fn store(&self) -> &PgStore {
        &self.store
    }

    async fn raw_keyed(&self, key: &str) -> anyhow::Result<()> {
        let pool = self.store.pool();
        let token = self.claim(pool, key).await?;
        let done = self.complete(pool, key, token).await?;
        anyhow::ensure!(done == 1, "raw completion of {key} changed {done} rows");
        Ok(())
    }

    async fn raw_local(&self, key: &str) -> anyhow::Result<()> {
        let mut tx = self.store.pool().begin().await?;
        let token = self.claim(&mut *tx, key).await?;
        sqlx::query(&self.insert_sql)
            .bind(key)
            .execute(&mut *tx)
            .await?;
        let done = self.complete(&mut *tx, key, token).await?;
        anyhow::ensure!(done == 1, "raw completion of {key} changed {done} rows");
        tx.commit().await?;
        Ok(())
    }

    async fn analyze(&self) -> anyhow::Result<()> {
        sqlx::query(&format!("ANALYZE \"{}\".ops", self.schema))
            .execute(self.store.pool())
            .await?;
        Ok(())
    }

    fn effect_sql(&self) -> String {
        self.insert_sql.clone()
    }

    fn minimal(&self) -> Option<&Minimal> {
        Some(&self.minimal)
    }

    fn batch_stats(&self) -> Option<onceonly_postgres::BatchStats> {
        self.store.batch_stats()
    }

    async fn insert_effect<'c>(
        sql: String,
        conn: &'c mut sqlx::PgConnection,
        ctx: &'c EffectCtx,
    ) -> Result<serde_json::Value, BoxError> {
        sqlx::query(&sql).bind(&ctx.op_key).execute(conn).await?;
        Ok(serde_json::Value::Null)
    }
}

/// MySQL or MariaDB in a fresh database of the server at the URL, dropped
/// afterwards.
pub struct MySqlTarget {
    store: MySqlStore,
    minimal: Minimal,
    /// The URL as given, whose database the bench's is made and dropped from.
    admin_url: String,
    database: String,
}

impl MySqlTarget {
    /// A fresh database `onceonly_bench_PID` on the server of `url`; the
    /// store's pool holds up to `connections` (the raw baselines run on it too).
    pub async fn new(url: &str, connections: u32) -> anyhow::Result<Self> {
        let database = format!("onceonly_bench_{}", std::process::id());
        let mut admin = sqlx::MySqlConnection::connect(url).await?;
        sqlx::raw_sql(&format!(
            "DROP DATABASE IF EXISTS `{database}`; CREATE DATABASE `{database}`"
        ))
        .execute(&mut admin)
        .await?;
        admin.close().await?;
        let mut bench_url = url::Url::parse(url)?;
        bench_url.set_path(&format!("/{database}"));
        let store = MySqlStore::connect_with(
            bench_url.as_str(),
            MySqlOptions::default().max_connections(connections),
        )
        .await?;
        store.migrate().await?;
        sqlx::query("CREATE TABLE bench_effects (op_key VARCHAR(255) PRIMARY KEY)")
            .execute(store.pool())
            .await?;
        Ok(Self {
            minimal: Minimal::MySql(
                MySqlMinimal::new(store.pool(), bench_url.as_str(), &database).await?,
            ),
            store,
            admin_url: url.to_owned(),
            database,
        })
    }

    /// Drops the bench's database, or says why it could not.
    pub async fn drop_schema(&self) -> Result<(), String> {
        let why = |e: sqlx::Error| format!("could not drop database {}: {e}", self.database);
        self.store.pool().close().await;
        let mut admin = sqlx::MySqlConnection::connect(&self.admin_url)
            .await
            .map_err(why)?;
        sqlx::raw_sql(&format!("DROP DATABASE `{}`", self.database))
            .execute(&mut admin)
            .await
            .map_err(why)?;
        Ok(())
    }

    /// The store's claim of a new operation: the clock, then the insert
    /// (token 1).
    async fn claim(&self, conn: &mut sqlx::MySqlConnection, key: &str) -> anyhow::Result<i64> {
        let now: i64 = sqlx::query_scalar(mysql_sql::NOW)
            .bind(0_i64)
            .fetch_one(&mut *conn)
            .await?;
        let inserted = sqlx::query(mysql_sql::CLAIM_INSERT)
            .bind("bench_raw")
            .bind(key)
            .bind("bench")
            .bind(Payload::none().fingerprint)
            .bind(None::<String>)
            .bind(now)
            .bind(now + LEASE_MS)
            .bind(now)
            .bind(now)
            .execute(&mut *conn)
            .await?
            .rows_affected();
        anyhow::ensure!(inserted == 1, "raw claim of {key} inserted {inserted} rows");
        Ok(1)
    }

    /// The store's completion: `move.sql`, bound as the store binds it.
    async fn complete(
        &self,
        conn: &mut sqlx::MySqlConnection,
        key: &str,
        token: i64,
    ) -> anyhow::Result<u64> {
        let m = completion("bench_raw", key, token);
        let done = sqlx::query(mysql_sql::MOVE)
            .bind(0_i64)
            .bind(m.to.as_str())
            .bind(m.external_ref)
            .bind(m.result)
            .bind(m.error)
            .bind(0_i64)
            .bind(m.job_type)
            .bind(m.op_key)
            .bind(m.token)
            .bind(m.from.as_str())
            .bind(m.unless_cancel_requested)
            .execute(conn)
            .await?;
        Ok(done.rows_affected())
    }
}

impl BenchTarget for MySqlTarget {
    const NAME: &'static str = "mysql";
    type S = MySqlStore;

    fn store(&self) -> &MySqlStore {
        &self.store
    }

    async fn raw_keyed(&self, key: &str) -> anyhow::Result<()> {
        // A connection from the pool per statement group, as the store takes
        // one per call (the claim's two statements, then the completion).
        let token = self
            .claim(&mut *self.store.pool().acquire().await?, key)
            .await?;
        let done = self
            .complete(&mut *self.store.pool().acquire().await?, key, token)
            .await?;
        anyhow::ensure!(done == 1, "raw completion of {key} changed {done} rows");
        Ok(())
    }

    async fn raw_local(&self, key: &str) -> anyhow::Result<()> {
        let mut tx = self.store.pool().begin().await?;
        let token = self.claim(&mut tx, key).await?;
        sqlx::query(&self.effect_sql())
            .bind(key)
            .execute(&mut *tx)
            .await?;
        let done = self.complete(&mut tx, key, token).await?;
        anyhow::ensure!(done == 1, "raw completion of {key} changed {done} rows");
        tx.commit().await?;
        Ok(())
    }

    async fn analyze(&self) -> anyhow::Result<()> {
        sqlx::query("ANALYZE TABLE onceonly_ops")
            .execute(self.store.pool())
            .await?;
        Ok(())
    }

    fn effect_sql(&self) -> String {
        "INSERT INTO bench_effects (op_key) VALUES (?)".into()
    }

    fn minimal(&self) -> Option<&Minimal> {
        Some(&self.minimal)
    }

    async fn insert_effect<'c>(
        sql: String,
        conn: &'c mut sqlx::MySqlConnection,
        ctx: &'c EffectCtx,
    ) -> Result<serde_json::Value, BoxError> {
        sqlx::query(&sql).bind(&ctx.op_key).execute(conn).await?;
        Ok(serde_json::Value::Null)
    }
}
