//! onceonly's [`Store`] for PostgreSQL.
//!
//! The records live in a schema of their own (`onceonly` by default, see
//! [`PgOptions::schema`]): `<schema>.ops`, `<schema>.audit` and
//! `<schema>.migrations`. Every
//! statement names the schema, so the connection's `search_path` is left as
//! the user set it: a local effect's own writes run on the same connection,
//! in the same transaction, as the claim and the completion.
//!
//! Times are the database's clock (`statement_timestamp()`), in
//! milliseconds since the Unix epoch, plus the store's [`ClockOffset`].
//!
//! ```no_run
//! # async fn demo() -> onceonly::Result<()> {
//! use onceonly::Store;
//! use onceonly_postgres::{PgOptions, PgStore};
//!
//! let store = PgStore::connect("postgres://app@db.internal/app").await?;
//! store.migrate().await?;
//!
//! // Another schema, a smaller pool:
//! let options = PgOptions::default().schema("billing_ops").max_connections(4);
//! let billing = PgStore::connect_with("postgres://app@db.internal/app", options).await?;
//! billing.migrate().await?;
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]

mod batcher;
mod operator;
mod queries;

pub use batcher::BatchStats;

/// What a harness needs to run the store's SQL files itself (plan tests,
/// benchmarks): the batcher's session settings, and the schema put in the
/// place of `onceonly`, which the files name.
pub mod sql {
    /// The session settings of the batcher's own connections. Its batch
    /// statements join their arrays to the table; a hash or merge join would
    /// take the rows in the table's order, and only a nested loop over the
    /// primary key takes (and locks) them in the arrays' order, which is
    /// sorted by key in every process.
    pub const BATCH_SETTINGS: &[(&str, &str)] =
        &[("enable_hashjoin", "off"), ("enable_mergejoin", "off")];

    /// `sql` with the schema `schema` (a valid identifier) in place of `onceonly`.
    pub fn in_schema(sql: &str, schema: &str) -> String {
        crate::queries::in_schema(sql, schema)
    }
}

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use onceonly::store::{
    Claim, ClaimRow, Enqueued, Heartbeat, OpAudit, OpClaim, OpClaimBatch, OpCompleteBatch,
    OpEnqueue, OpHeartbeat, OpList, OpMove, OpPurge, OpRequestCancel, OpTakeOver,
};
use onceonly::{AuditEvent, ClockOffset, DbTime, Error, Record, Result, Snapshot, Store};
use onceonly_sqlx::{map_err, Migration};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Connection, PgConnection, PgPool, Postgres, Transaction};

use crate::queries::Queries;

/// The migrations, applied in order by [`Store::migrate`]. Their SQL names
/// the schema `onceonly`; the store's own schema is put in its place.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "ops",
        sql: include_str!("../migrations/0001_ops.sql"),
    },
    Migration {
        version: 2,
        name: "audit",
        sql: include_str!("../migrations/0002_audit.sql"),
    },
    Migration {
        version: 3,
        name: "partial_indexes",
        sql: include_str!("../migrations/0003_partial_indexes.sql"),
    },
    Migration {
        version: 4,
        name: "operator",
        sql: include_str!("../migrations/0004_operator.sql"),
    },
    Migration {
        version: 5,
        name: "audit_release",
        sql: include_str!("../migrations/0005_audit_release.sql"),
    },
];

/// The schema used when none is given.
pub const DEFAULT_SCHEMA: &str = "onceonly";

/// The pool size used when none is given.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 16;

/// Claims or moves per statement at most, when none is given.
pub const DEFAULT_MAX_BATCH: usize = 256;

/// Batch statements of each kind in flight at once, when none is given.
pub const DEFAULT_BATCH_LANES: usize = 2;

/// Longest schema name PostgreSQL keeps, in bytes.
pub const MAX_SCHEMA_BYTES: usize = 63;

/// How [`PgStore::connect_with`] connects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgOptions {
    /// The schema holding the tables: `[a-z_][a-z0-9_]*`, at most
    /// [`MAX_SCHEMA_BYTES`], not starting with `pg_`. Default `onceonly`.
    pub schema: String,
    /// Pooled connections at most. Default 16.
    pub max_connections: u32,
    /// How long to wait for a connection, first at connect (then the
    /// database is [`Error::Unreachable`]) and later from the pool.
    /// Default 30 s.
    pub acquire_timeout: Duration,
    /// Claims (and moves) of concurrent callers sent as one statement, at
    /// most; 1 sends each on its own, on the pool. Default 256. Not for
    /// calls in the user's transaction, which run there as they come.
    pub max_batch: usize,
    /// Connections of their own sending claim batches, and as many for move
    /// batches (and for relays' claims of queued rows), each with one
    /// statement in flight. Default 2: while one statement runs, the calls
    /// arriving meanwhile go in the other.
    pub batch_lanes: usize,
}

impl Default for PgOptions {
    fn default() -> Self {
        Self {
            schema: DEFAULT_SCHEMA.to_owned(),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            acquire_timeout: Duration::from_secs(30),
            max_batch: DEFAULT_MAX_BATCH,
            batch_lanes: DEFAULT_BATCH_LANES,
        }
    }
}

impl PgOptions {
    /// Uses `schema` for the tables.
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = schema.into();
        self
    }

    /// Pools at most `n` connections (at least 1).
    pub fn max_connections(mut self, n: u32) -> Self {
        self.max_connections = n;
        self
    }

    /// Sends at most `n` claims or moves per statement (1: no batching).
    pub fn max_batch(mut self, n: usize) -> Self {
        self.max_batch = n;
        self
    }

    /// Runs `n` claim batches (and `n` move batches) at once.
    pub fn batch_lanes(mut self, n: usize) -> Self {
        self.batch_lanes = n;
        self
    }

    /// Waits at most `timeout` for a connection.
    pub fn acquire_timeout(mut self, timeout: Duration) -> Self {
        self.acquire_timeout = timeout;
        self
    }
}

/// Checks a schema name: `[a-z_][a-z0-9_]*`, at most [`MAX_SCHEMA_BYTES`]
/// bytes, and not `pg_…` (reserved by PostgreSQL).
pub fn validate_schema(schema: &str) -> Result<()> {
    let mut chars = schema.chars();
    let well_formed = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !well_formed {
        return Err(Error::Invalid(format!(
            "schema {schema:?} is not an identifier; use [a-z_][a-z0-9_]*"
        )));
    }
    if schema.len() > MAX_SCHEMA_BYTES {
        return Err(Error::Invalid(format!(
            "schema {schema:?} is {} bytes, the limit is {MAX_SCHEMA_BYTES}",
            schema.len()
        )));
    }
    if schema.starts_with("pg_") {
        return Err(Error::Invalid(format!(
            "schema {schema:?} starts with pg_, which PostgreSQL reserves"
        )));
    }
    Ok(())
}

/// The advisory lock key [`Store::migrate`] holds for `schema`: FNV-1a of
/// `onceonly.migrate:` and the name, the same in every process and build.
fn migrate_lock_key(schema: &str) -> i64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in "onceonly.migrate:".bytes().chain(schema.bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    i64::from_ne_bytes(hash.to_ne_bytes())
}

/// A [`Store`] on one PostgreSQL database, in one schema.
///
/// Clones share the pool and the clock offset.
#[derive(Clone)]
pub struct PgStore {
    pool: PgPool,
    url: String,
    options: PgOptions,
    queries: Arc<Queries>,
    clock: ClockOffset,
    /// Claims and moves outside the user's transaction (`None`: one
    /// statement per call, on the pool).
    batcher: Option<Arc<batcher::Batcher>>,
}

impl fmt::Debug for PgStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgStore")
            .field("url", &onceonly::db_url::redact(&self.url))
            .field("options", &self.options)
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}

impl PgStore {
    /// Connects to the database at `url` (`postgres://…` or
    /// `postgresql://…`), with the tables in the schema `onceonly` and a pool
    /// of 16 connections.
    ///
    /// Returns [`Error::Unreachable`], password redacted, when no connection
    /// can be opened.
    pub async fn connect(url: &str) -> Result<Self> {
        Self::connect_with(url, PgOptions::default()).await
    }

    /// Like [`PgStore::connect`] with `options`. Refuses an invalid schema
    /// name with [`Error::Invalid`].
    pub async fn connect_with(url: &str, options: PgOptions) -> Result<Self> {
        Self::connect_sharing_clock(url, options, ClockOffset::default()).await
    }

    async fn connect_sharing_clock(
        url: &str,
        options: PgOptions,
        clock: ClockOffset,
    ) -> Result<Self> {
        validate_schema(&options.schema)?;
        let connect = PgConnectOptions::from_str(url)
            .map_err(|e| {
                Error::Invalid(format!(
                    "{:?} is not a PostgreSQL URL: {e}",
                    onceonly::db_url::redact(url)
                ))
            })?
            .application_name("onceonly");
        // One connection first, so an unreachable database is reported at
        // once with the driver's reason; the pool alone would retry a refused
        // connection until its timeout and then only say it timed out.
        let probe = tokio::time::timeout(
            options.acquire_timeout,
            PgConnection::connect_with(&connect),
        )
        .await
        .map_err(|_| Error::Unreachable {
            url: onceonly::db_url::redact(url),
            reason: format!("no connection within {:?}", options.acquire_timeout),
        })?
        .map_err(map_err(url))?;
        let _ = probe.close().await;
        let queries = Arc::new(Queries::new(&options.schema));
        let batcher = (options.max_batch > 1).then(|| {
            let shared = batcher::Shared {
                // Named apart from the pool's connections, for operators.
                connect: connect
                    .clone()
                    .application_name("onceonly-batch")
                    .options(sql::BATCH_SETTINGS.iter().copied()),
                url: url.to_owned(),
                queries: queries.clone(),
                clock: clock.clone(),
            };
            Arc::new(batcher::Batcher::start(
                Arc::new(shared),
                options.batch_lanes,
                options.max_batch,
            ))
        });
        let pool = PgPoolOptions::new()
            .max_connections(options.max_connections.max(1))
            .acquire_timeout(options.acquire_timeout)
            // A ping before every acquire would double the round trips per
            // call; a connection broken by a server restart fails its next
            // statement instead, is dropped, and the caller retries.
            .test_before_acquire(false)
            .connect_lazy_with(connect);
        Ok(Self {
            pool,
            url: url.to_owned(),
            queries,
            options,
            clock,
            batcher,
        })
    }

    /// Another store on the same database and schema with its own pool,
    /// sharing this store's clock offset (a second worker, in tests).
    pub async fn reconnect(&self) -> Result<Self> {
        Self::connect_sharing_clock(&self.url, self.options.clone(), self.clock.clone()).await
    }

    /// What the batcher has done so far; `None` when batching is off
    /// ([`PgOptions::max_batch`] 1).
    pub fn batch_stats(&self) -> Option<BatchStats> {
        self.batcher.as_ref().map(|b| b.stats())
    }

    /// The pool, for the user's own queries.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// The schema holding the tables.
    pub fn schema(&self) -> &str {
        &self.options.schema
    }

    /// Whether the schema holds onceonly's tables (`migrate` has run).
    pub async fn has_tables(&self) -> Result<bool> {
        let found: Option<String> = sqlx::query_scalar("SELECT to_regclass($1)::text")
            .bind(format!("\"{}\".ops", self.schema()))
            .fetch_one(&self.pool)
            .await
            .map_err(map_err(&self.url))?;
        Ok(found.is_some())
    }

    fn err(&self) -> impl Fn(sqlx::Error) -> Error + '_ {
        map_err(&self.url)
    }

    async fn conn(&self) -> Result<sqlx::pool::PoolConnection<Postgres>> {
        self.pool.acquire().await.map_err(self.err())
    }

    fn offset(&self) -> i64 {
        self.clock.millis()
    }
}

impl Store for PgStore {
    type Conn = PgConnection;
    type Tx = Transaction<'static, Postgres>;

    async fn migrate(&self) -> Result<()> {
        // The advisory lock is held until commit, so two processes migrating
        // at once apply each migration once; the DDL commits or rolls back
        // as a whole.
        let mut tx = self.begin().await?;
        let applied = self
            .queries
            .migrate(&mut tx, migrate_lock_key(self.schema()), MIGRATIONS)
            .await
            .map_err(self.err())?;
        Self::commit(tx).await?;
        tracing::debug!(schema = self.schema(), applied, "migrated");
        Ok(())
    }

    async fn begin(&self) -> Result<Self::Tx> {
        self.pool.begin().await.map_err(self.err())
    }

    async fn commit(tx: Self::Tx) -> Result<()> {
        // Mapped like every other statement (the URL is not at hand here).
        tx.commit()
            .await
            .map_err(map_err("the transaction's database"))
    }

    async fn op_claim(&self, p: &OpClaim<'_>) -> Result<ClaimRow> {
        if let Some(batcher) = &self.batcher {
            return batcher.claim(p).await;
        }
        let mut conn = self.conn().await?;
        self.op_claim_in(&mut conn, p).await
    }

    async fn op_claim_in(&self, conn: &mut PgConnection, p: &OpClaim<'_>) -> Result<ClaimRow> {
        let claimed = self
            .queries
            .claim(&mut *conn, self.offset(), p)
            .await
            .map_err(self.err())?;
        match claimed {
            Some(claim) => Ok(ClaimRow::Claimed(claim)),
            None => match self.op_get_in(conn, p.job_type, p.op_key).await? {
                Some(snap) => Ok(ClaimRow::Existing(Box::new(snap))),
                None => Err(Error::db_other(format!(
                    "{}:{} conflicted on claim but is gone (purged meanwhile?)",
                    p.job_type, p.op_key
                ))),
            },
        }
    }

    async fn op_take_over(&self, p: &OpTakeOver<'_>) -> Result<Option<Claim>> {
        self.queries
            .take_over(&mut *self.conn().await?, self.offset(), p)
            .await
            .map_err(self.err())
    }

    async fn op_complete_batch(&self, p: &OpCompleteBatch<'_>) -> Result<Vec<String>> {
        if let Some(batcher) = &self.batcher {
            return batcher.complete(p).await;
        }
        let mut tx = self.begin().await?;
        let completed = self
            .queries
            .complete_batch(&mut tx, self.offset(), p)
            .await
            .map_err(self.err())?;
        Self::commit(tx).await?;
        Ok(completed)
    }

    async fn op_move(&self, p: &OpMove<'_>) -> Result<bool> {
        if let Some(batcher) = &self.batcher {
            return batcher.move_op(p).await;
        }
        let mut conn = self.conn().await?;
        self.op_move_in(&mut conn, p).await
    }

    async fn op_move_in(&self, conn: &mut PgConnection, p: &OpMove<'_>) -> Result<bool> {
        let affected = self
            .queries
            .move_op(conn, self.offset(), p)
            .await
            .map_err(self.err())?;
        Ok(affected == 1)
    }

    async fn op_heartbeat(&self, p: &OpHeartbeat<'_>) -> Result<Option<Heartbeat>> {
        self.queries
            .heartbeat(&mut *self.conn().await?, self.offset(), p)
            .await
            .map_err(self.err())
    }

    async fn op_request_cancel(&self, p: &OpRequestCancel<'_>) -> Result<bool> {
        let affected = self
            .queries
            .request_cancel(&mut *self.conn().await?, self.offset(), p)
            .await
            .map_err(self.err())?;
        Ok(affected == 1)
    }

    async fn op_get(&self, job_type: &str, op_key: &str) -> Result<Option<Snapshot>> {
        let mut conn = self.conn().await?;
        self.op_get_in(&mut conn, job_type, op_key).await
    }

    async fn op_get_in(
        &self,
        conn: &mut PgConnection,
        job_type: &str,
        op_key: &str,
    ) -> Result<Option<Snapshot>> {
        self.queries
            .get(conn, self.offset(), job_type, op_key)
            .await
            .map_err(self.err())
    }

    async fn op_list(&self, p: &OpList<'_>) -> Result<Vec<Record>> {
        self.queries
            .list(&mut *self.conn().await?, self.offset(), p)
            .await
            .map_err(self.err())
    }

    async fn op_purge(&self, p: &OpPurge<'_>) -> Result<u64> {
        let mut tx = self.begin().await?;
        let purged = self
            .queries
            .purge(&mut tx, self.offset(), p)
            .await
            .map_err(self.err())?;
        self.queries
            .purge_audit(&mut tx, p.job_type)
            .await
            .map_err(self.err())?;
        Self::commit(tx).await?;
        Ok(purged)
    }

    async fn op_enqueue(&self, p: &OpEnqueue<'_>) -> Result<Enqueued> {
        let mut conn = self.conn().await?;
        self.op_enqueue_in(&mut conn, p).await
    }

    async fn op_enqueue_in(&self, conn: &mut PgConnection, p: &OpEnqueue<'_>) -> Result<Enqueued> {
        let affected = self
            .queries
            .enqueue(&mut *conn, self.offset(), p)
            .await
            .map_err(self.err())?;
        if affected == 1 {
            return Ok(Enqueued::Inserted);
        }
        match self.op_get_in(conn, p.job_type, p.op_key).await? {
            Some(snap) => Ok(Enqueued::Existing(Box::new(snap.record))),
            None => Err(Error::db_other(format!(
                "{}:{} conflicted on enqueue but is gone (purged meanwhile?)",
                p.job_type, p.op_key
            ))),
        }
    }

    async fn op_claim_batch(&self, p: &OpClaimBatch<'_>) -> Result<Vec<(Record, Claim)>> {
        if let Some(batcher) = &self.batcher {
            return batcher.claim_queued(p).await;
        }
        self.queries
            .claim_batch(&mut *self.conn().await?, self.offset(), p)
            .await
            .map_err(self.err())
    }

    async fn op_audit(&self, p: &OpAudit<'_>) -> Result<()> {
        let affected = self
            .queries
            .audit(&mut *self.conn().await?, self.offset(), p)
            .await
            .map_err(self.err())?;
        if affected == 1 {
            Ok(())
        } else {
            Err(Error::db_other(format!(
                "audit append for {}:{} inserted {affected} rows",
                p.job_type, p.op_key
            )))
        }
    }

    async fn op_history(&self, job_type: &str, op_key: &str) -> Result<Vec<AuditEvent>> {
        self.queries
            .history(&mut *self.conn().await?, job_type, op_key)
            .await
            .map_err(self.err())
    }

    async fn now(&self) -> Result<DbTime> {
        self.queries
            .now(&mut *self.conn().await?, self.offset())
            .await
            .map_err(self.err())
    }

    fn clock_offset(&self) -> &ClockOffset {
        &self.clock
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_names() {
        for good in ["onceonly", "_x", "t_0123abcd", &"a".repeat(63)] {
            validate_schema(good).unwrap();
        }
        for bad in [
            "",
            "Ops",
            "1x",
            "a-b",
            "a.b",
            "a\"b",
            "pg_x",
            "é",
            &"a".repeat(64),
        ] {
            assert!(
                matches!(validate_schema(bad), Err(Error::Invalid(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn lock_keys_differ_by_schema_and_stay_put() {
        assert_ne!(migrate_lock_key("onceonly"), migrate_lock_key("billing"));
        assert_eq!(migrate_lock_key("onceonly"), migrate_lock_key("onceonly"));
    }
}
