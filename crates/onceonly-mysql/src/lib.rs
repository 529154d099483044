//! onceonly's [`Store`] for MySQL and MariaDB (tested on MariaDB 10.11).
//!
//! The records live in the URL's database, in the tables `onceonly_ops`,
//! `onceonly_audit` and `onceonly_migrations` (InnoDB). A local effect's own
//! writes run on the same connection, in the same transaction, as the claim
//! and the completion.
//!
//! What differs from PostgreSQL, and how the store closes each trap:
//!
//! - **Affected rows.** sqlx connects with CLIENT_FOUND_ROWS, so an UPDATE
//!   counts the rows it *matched*; most other drivers (PyMySQL, mysql2, PHP)
//!   count the rows it *changed*. Every statement that decides who acts
//!   changes the row whenever it matches it: it writes a new token or state,
//!   and always `version = version + 1`. "Matched but unchanged" cannot
//!   occur, so the count means the same with CLIENT_FOUND_ROWS and without
//!   (`tests/found_rows.rs` runs the statements through the `mysql` client,
//!   which does not set it). No statement decides by `INSERT IGNORE` or
//!   `ON DUPLICATE KEY UPDATE`, whose counts differ between the two modes.
//! - **No `UPDATE ... RETURNING`** (MariaDB lacks it; MySQL 8 has no
//!   RETURNING at all). A claim reads the clock, then inserts the record
//!   claimed at that time (1: ours, token 1); on a duplicate key it reads the
//!   record and claims it with an update fenced on the token read (1: ours,
//!   token + 1). It reports what it wrote. In the user's transaction a
//!   record a plain read finds is locked first (`get_locked.sql`) and then
//!   claimed, so two transactions claiming one key queue instead of each
//!   upgrading the duplicate key's shared lock (deadlock). A take-over and a
//!   heartbeat read their row back in the transaction that wrote it.
//! - **Collation.** `job_type` and `op_key` are `utf8mb4_nopad_bin`: bytewise,
//!   case and trailing spaces significant (`utf8mb4_bin` pads: `k` and `k `
//!   would be one key). On MySQL 8 the same is `utf8mb4_0900_bin`.
//! - **Strict mode.** Every connection adds `STRICT_ALL_TABLES` to its
//!   `sql_mode`, and connect checks it: a value too long for its column is
//!   refused ([`Error::Invalid`]), never cut.
//! - **Deadlocks and lock waits.** Work on the store's own connections that
//!   meets 1213 or 1205 runs again from its first statement, at most
//!   [`retry::MAX_ATTEMPTS`] times; in the user's transaction the error goes
//!   to the caller (a deadlock rolled the user's writes back too). Batches
//!   write their rows in key order.
//! - **Time.** `NOW(6)` (NOW() has no fraction) in ms since the epoch, read
//!   in a session whose `time_zone` is `+00:00`; times are stored as BIGINT
//!   ms, as on the other databases.
//!
//! Batches are one statement per operation, in key order, in one
//! transaction; PostgreSQL's cross-caller batcher is not here yet.
//!
//! ```no_run
//! # async fn demo() -> onceonly::Result<()> {
//! use onceonly::Store;
//! use onceonly_mysql::MySqlStore;
//!
//! let store = MySqlStore::connect("mysql://app@db.internal/app").await?;
//! store.migrate().await?;
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]

mod claim;
mod errors;
mod operator;
mod queries;
pub mod retry;

pub use errors::map_err;
pub use queries::deciding;

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use onceonly::store::{
    Claim, ClaimRow, Enqueued, Heartbeat, OpAudit, OpClaim, OpClaimBatch, OpCompleteBatch,
    OpEnqueue, OpHeartbeat, OpList, OpMove, OpPurge, OpRequestCancel, OpTakeOver,
};
use onceonly::{AuditEvent, ClockOffset, DbTime, Error, Record, Result, Snapshot, Store};
use onceonly_sqlx::Migration;
use sqlx::mysql::{MySqlConnectOptions, MySqlPoolOptions};
use sqlx::{Connection, Executor, MySql, MySqlConnection, MySqlPool, Transaction};

use crate::claim::Claimed;
use crate::retry::retried;

type SqlResult<T> = std::result::Result<T, sqlx::Error>;

/// The migrations, applied in order by [`Store::migrate`].
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
];

/// The pool size used when none is given.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 16;

/// How long `migrate` waits for another process's migration, in seconds.
const MIGRATE_WAIT_SECS: i64 = 60;

/// Run on every new connection: strict mode, so a too-long value is an
/// error on every table (STRICT_TRANS_TABLES alone still cuts values on
/// non-transactional tables), and its check.
const SESSION_STRICT: &str = include_str!("../queries/session_strict.sql");
const SESSION_SQL_MODE: &str = include_str!("../queries/session_sql_mode.sql");

/// How [`MySqlStore::connect_with`] connects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MySqlOptions {
    /// Pooled connections at most. Default 16.
    pub max_connections: u32,
    /// How long to wait for a connection, first at connect (then the
    /// database is [`Error::Unreachable`]) and later from the pool.
    /// Default 30 s.
    pub acquire_timeout: Duration,
}

impl Default for MySqlOptions {
    fn default() -> Self {
        Self {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            acquire_timeout: Duration::from_secs(30),
        }
    }
}

impl MySqlOptions {
    /// Pools at most `n` connections (at least 1).
    pub fn max_connections(mut self, n: u32) -> Self {
        self.max_connections = n;
        self
    }

    /// Waits at most `timeout` for a connection.
    pub fn acquire_timeout(mut self, timeout: Duration) -> Self {
        self.acquire_timeout = timeout;
        self
    }
}

/// A [`Store`] on one MySQL or MariaDB database.
///
/// Clones share the pool and the clock offset.
#[derive(Clone)]
pub struct MySqlStore {
    pool: MySqlPool,
    url: String,
    options: MySqlOptions,
    clock: ClockOffset,
    /// Work run again after a deadlock or lock wait, in this store's clones.
    retries: Arc<AtomicU64>,
}

impl fmt::Debug for MySqlStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MySqlStore")
            .field("url", &onceonly::db_url::redact(&self.url))
            .field("options", &self.options)
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}

/// Adds strict mode to a new connection's session.
async fn strict(conn: &mut MySqlConnection) -> std::result::Result<(), sqlx::Error> {
    conn.execute(SESSION_STRICT).await.map(|_| ())
}

impl MySqlStore {
    /// Connects to the database at `url` (`mysql://…` or `mariadb://…`, which
    /// must name a database), with a pool of 16 connections.
    ///
    /// Returns [`Error::Unreachable`], password redacted, when no connection
    /// can be opened, and [`Error::Invalid`] when the URL names no database
    /// or the session cannot be put in strict mode.
    pub async fn connect(url: &str) -> Result<Self> {
        Self::connect_with(url, MySqlOptions::default()).await
    }

    /// Like [`MySqlStore::connect`] with `options`.
    pub async fn connect_with(url: &str, options: MySqlOptions) -> Result<Self> {
        Self::connect_sharing_clock(url, options, ClockOffset::default()).await
    }

    async fn connect_sharing_clock(
        url: &str,
        options: MySqlOptions,
        clock: ClockOffset,
    ) -> Result<Self> {
        let connect = connect_options(url)?;
        // One connection first, so an unreachable database is reported at
        // once with the driver's reason, and strict mode is checked.
        let mut probe = tokio::time::timeout(
            options.acquire_timeout,
            MySqlConnection::connect_with(&connect),
        )
        .await
        .map_err(|_| Error::Unreachable {
            url: onceonly::db_url::redact(url),
            reason: format!("no connection within {:?}", options.acquire_timeout),
        })?
        .map_err(map_err(url))?;
        strict(&mut probe).await.map_err(map_err(url))?;
        let mode: String = sqlx::query_scalar(SESSION_SQL_MODE)
            .fetch_one(&mut probe)
            .await
            .map_err(map_err(url))?;
        let _ = probe.close().await;
        if !mode.split(',').any(|m| m == "STRICT_ALL_TABLES") {
            return Err(Error::Invalid(format!(
                "{}: the session's sql_mode {mode:?} lacks STRICT_ALL_TABLES after setting it; \
                 too-long keys would be cut",
                onceonly::db_url::redact(url)
            )));
        }
        let pool = MySqlPoolOptions::new()
            .max_connections(options.max_connections.max(1))
            .acquire_timeout(options.acquire_timeout)
            .test_before_acquire(false)
            .after_connect(|conn, _| Box::pin(strict(conn)))
            .connect_lazy_with(connect);
        Ok(Self {
            pool,
            url: url.to_owned(),
            options,
            clock,
            retries: Arc::default(),
        })
    }

    /// Another store on the same database with its own pool, sharing this
    /// store's clock offset (a second worker, in tests).
    pub async fn reconnect(&self) -> Result<Self> {
        Self::connect_sharing_clock(&self.url, self.options.clone(), self.clock.clone()).await
    }

    /// How many times work was run again after a deadlock (1213) or a lock
    /// wait timeout (1205), by this store and its clones.
    pub fn lock_retries(&self) -> u64 {
        self.retries.load(Ordering::Relaxed)
    }

    /// The pool, for the user's own queries.
    pub fn pool(&self) -> &MySqlPool {
        &self.pool
    }

    /// Whether the database holds onceonly's tables (`migrate` has run).
    pub async fn has_tables(&self) -> Result<bool> {
        let found: Option<String> = sqlx::query_scalar(include_str!("../queries/has_tables.sql"))
            .fetch_optional(&self.pool)
            .await
            .map_err(self.err())?;
        Ok(found.is_some())
    }

    fn err(&self) -> impl Fn(sqlx::Error) -> Error + '_ {
        map_err(&self.url)
    }

    fn offset(&self) -> i64 {
        self.clock.millis()
    }
}

/// The driver's options for `url`, refusing a URL that names no database.
fn connect_options(url: &str) -> Result<MySqlConnectOptions> {
    let redacted = onceonly::db_url::redact(url);
    // sqlx reads `mariadb://` as MySQL too; the scheme is checked by DbKind.
    let connect = MySqlConnectOptions::from_str(url)
        .map_err(|e| Error::Invalid(format!("{redacted:?} is not a MySQL URL: {e}")))?;
    if connect.get_database().is_none_or(str::is_empty) {
        return Err(Error::Invalid(format!(
            "{redacted:?} names no database: onceonly keeps its tables in the URL's database \
             (mysql://user@host:3306/DATABASE)"
        )));
    }
    Ok(connect)
}

impl Store for MySqlStore {
    type Conn = MySqlConnection;
    type Tx = Transaction<'static, MySql>;

    async fn migrate(&self) -> Result<()> {
        // A connection of its own: the named lock belongs to the session.
        let mut conn = self.pool.acquire().await.map_err(self.err())?;
        let applied = queries::migrate(&mut conn, MIGRATE_WAIT_SECS, MIGRATIONS)
            .await
            .map_err(self.err())?;
        match applied {
            Some(applied) => {
                tracing::debug!(applied, "migrated");
                Ok(())
            }
            None => Err(Error::db_other(format!(
                "another process held the migration lock of {} for {MIGRATE_WAIT_SECS}s",
                onceonly::db_url::redact(&self.url)
            ))),
        }
    }

    async fn begin(&self) -> Result<Self::Tx> {
        self.pool.begin().await.map_err(self.err())
    }

    async fn commit(tx: Self::Tx) -> Result<()> {
        tx.commit()
            .await
            .map_err(map_err("the transaction's database"))
    }

    async fn op_claim(&self, p: &OpClaim<'_>) -> Result<ClaimRow> {
        let offset = self.offset();
        let claimed = retried("claim", &self.retries, || async move {
            let mut conn = self.pool.acquire().await?;
            claim::claim(&mut conn, offset, p, false).await
        })
        .await
        .map_err(self.err())?;
        self.claim_row(p, claimed)
    }

    async fn op_claim_in(&self, conn: &mut MySqlConnection, p: &OpClaim<'_>) -> Result<ClaimRow> {
        let claimed = claim::claim(conn, self.offset(), p, true)
            .await
            .map_err(self.err())?;
        self.claim_row(p, claimed)
    }

    async fn op_take_over(&self, p: &OpTakeOver<'_>) -> Result<Option<Claim>> {
        let offset = self.offset();
        retried("take over", &self.retries, || async move {
            let mut tx = self.pool.begin().await?;
            let claim = match queries::take_over(&mut tx, offset, p).await? {
                1 => queries::take_over_read(&mut tx, p.job_type, p.op_key, p.stale_token + 1)
                    .await?
                    .map(Some)
                    .ok_or_else(|| protocol("take-over", p.job_type, p.op_key, "row gone"))?,
                0 => None,
                n => return Err(protocol("take-over", p.job_type, p.op_key, &affected(n))),
            };
            tx.commit().await?;
            Ok(claim)
        })
        .await
        .map_err(self.err())
    }

    async fn op_complete_batch(&self, p: &OpCompleteBatch<'_>) -> Result<Vec<String>> {
        // Key order: two batches lock their rows in the same order. A key
        // given twice is tried twice; the second finds it completed (0).
        let mut items: Vec<_> = p.items.iter().collect();
        items.sort_by(|a, b| a.op_key.cmp(b.op_key));
        let offset = self.offset();
        let items = &items;
        retried("complete batch", &self.retries, || async move {
            let mut tx = self.pool.begin().await?;
            let mut completed = Vec::new();
            for c in items {
                match queries::complete(&mut tx, offset, p.job_type, c).await? {
                    1 => completed.push(c.op_key.to_owned()),
                    0 => {}
                    n => return Err(protocol("completion", p.job_type, c.op_key, &affected(n))),
                }
            }
            tx.commit().await?;
            Ok(completed)
        })
        .await
        .map_err(self.err())
    }

    async fn op_move(&self, p: &OpMove<'_>) -> Result<bool> {
        let offset = self.offset();
        let n = retried("move", &self.retries, || async move {
            queries::move_op(&mut *self.pool.acquire().await?, offset, p).await
        })
        .await
        .map_err(self.err())?;
        self.one_or_none("move", p.job_type, p.op_key, n)
    }

    async fn op_move_in(&self, conn: &mut MySqlConnection, p: &OpMove<'_>) -> Result<bool> {
        let n = queries::move_op(conn, self.offset(), p)
            .await
            .map_err(self.err())?;
        self.one_or_none("move", p.job_type, p.op_key, n)
    }

    async fn op_heartbeat(&self, p: &OpHeartbeat<'_>) -> Result<Option<Heartbeat>> {
        let offset = self.offset();
        retried("heartbeat", &self.retries, || async move {
            let mut tx = self.pool.begin().await?;
            let beat = match queries::heartbeat(&mut tx, offset, p).await? {
                1 => queries::heartbeat_read(&mut tx, p).await?,
                0 => None,
                n => return Err(protocol("heartbeat", p.job_type, p.op_key, &affected(n))),
            };
            tx.commit().await?;
            Ok(beat)
        })
        .await
        .map_err(self.err())
    }

    async fn op_request_cancel(&self, p: &OpRequestCancel<'_>) -> Result<bool> {
        let offset = self.offset();
        let n = retried("request cancel", &self.retries, || async move {
            queries::request_cancel(&mut *self.pool.acquire().await?, offset, p).await
        })
        .await
        .map_err(self.err())?;
        self.one_or_none("cancel request", p.job_type, p.op_key, n)
    }

    async fn op_get(&self, job_type: &str, op_key: &str) -> Result<Option<Snapshot>> {
        let mut conn = self.pool.acquire().await.map_err(self.err())?;
        queries::get(&mut conn, self.offset(), job_type, op_key, false)
            .await
            .map_err(self.err())
    }

    async fn op_get_in(
        &self,
        conn: &mut MySqlConnection,
        job_type: &str,
        op_key: &str,
    ) -> Result<Option<Snapshot>> {
        queries::get(conn, self.offset(), job_type, op_key, false)
            .await
            .map_err(self.err())
    }

    async fn op_list(&self, p: &OpList<'_>) -> Result<Vec<Record>> {
        let mut conn = self.pool.acquire().await.map_err(self.err())?;
        queries::list(&mut conn, self.offset(), p)
            .await
            .map_err(self.err())
    }

    async fn op_purge(&self, p: &OpPurge<'_>) -> Result<u64> {
        let offset = self.offset();
        retried("purge", &self.retries, || async move {
            let mut tx = self.pool.begin().await?;
            let purged = queries::purge(&mut tx, offset, p).await?;
            queries::purge_audit(&mut tx, p.job_type).await?;
            tx.commit().await?;
            Ok(purged)
        })
        .await
        .map_err(self.err())
    }

    async fn op_enqueue(&self, p: &OpEnqueue<'_>) -> Result<Enqueued> {
        let offset = self.offset();
        let found = retried("enqueue", &self.retries, || async move {
            enqueue_on(&mut *self.pool.acquire().await?, offset, p, false).await
        })
        .await
        .map_err(self.err())?;
        self.enqueued(p, found)
    }

    async fn op_enqueue_in(
        &self,
        conn: &mut MySqlConnection,
        p: &OpEnqueue<'_>,
    ) -> Result<Enqueued> {
        let found = enqueue_on(conn, self.offset(), p, true)
            .await
            .map_err(self.err())?;
        self.enqueued(p, found)
    }

    async fn op_claim_batch(&self, p: &OpClaimBatch<'_>) -> Result<Vec<(Record, Claim)>> {
        let offset = self.offset();
        retried("claim batch", &self.retries, || async move {
            let mut tx = self.pool.begin().await?;
            let mut keys = queries::claim_batch_pick(&mut tx, offset, p.job_type, p.limit).await?;
            keys.sort();
            let mut claimed = Vec::with_capacity(keys.len());
            for key in &keys {
                match queries::claim_queued(&mut tx, offset, p.owner, p.lease, p.job_type, key)
                    .await?
                {
                    1 => {}
                    0 => continue,
                    n => return Err(protocol("batch claim", p.job_type, key, &affected(n))),
                }
                let record = queries::record(&mut tx, p.job_type, key)
                    .await?
                    .ok_or_else(|| protocol("batch claim", p.job_type, key, "row gone"))?;
                let claim = Claim {
                    token: record.token,
                    attempts: record.attempts,
                    claimed_at: record.claimed_at.unwrap_or(record.updated_at),
                    lease_until: record.lease_until.unwrap_or(record.updated_at),
                };
                claimed.push((record, claim));
            }
            tx.commit().await?;
            Ok(claimed)
        })
        .await
        .map_err(self.err())
    }

    async fn op_audit(&self, p: &OpAudit<'_>) -> Result<()> {
        let mut conn = self.pool.acquire().await.map_err(self.err())?;
        let n = queries::audit(&mut conn, self.offset(), p)
            .await
            .map_err(self.err())?;
        if n == 1 {
            Ok(())
        } else {
            Err(Error::db_other(format!(
                "audit append for {}:{} inserted {n} rows",
                p.job_type, p.op_key
            )))
        }
    }

    async fn op_history(&self, job_type: &str, op_key: &str) -> Result<Vec<AuditEvent>> {
        let mut conn = self.pool.acquire().await.map_err(self.err())?;
        queries::history(&mut conn, job_type, op_key)
            .await
            .map_err(self.err())
    }

    async fn now(&self) -> Result<DbTime> {
        let mut conn = self.pool.acquire().await.map_err(self.err())?;
        queries::now(&mut conn, self.offset())
            .await
            .map(DbTime)
            .map_err(self.err())
    }

    fn clock_offset(&self) -> &ClockOffset {
        &self.clock
    }
}

/// An enqueue: `None` inserted, `Some` the record that existed (`Some(None)`:
/// gone since the insert met it).
async fn enqueue_on(
    conn: &mut MySqlConnection,
    offset: i64,
    p: &OpEnqueue<'_>,
    in_tx: bool,
) -> SqlResult<Option<Option<Snapshot>>> {
    match queries::enqueue(conn, offset, p).await {
        Ok(1) => Ok(None),
        Ok(n) => Err(protocol("enqueue", p.job_type, p.op_key, &affected(n))),
        Err(e) if errors::is_duplicate(&e) => Ok(Some(
            queries::get(conn, offset, p.job_type, p.op_key, in_tx).await?,
        )),
        Err(e) => Err(e),
    }
}

fn affected(n: u64) -> String {
    format!("affected {n} rows")
}

/// A statement did what it cannot (more than one row for one key).
fn protocol(what: &str, job_type: &str, op_key: &str, why: &str) -> sqlx::Error {
    sqlx::Error::Protocol(format!("{what} of {job_type}:{op_key}: {why}"))
}

impl MySqlStore {
    fn claim_row(&self, p: &OpClaim<'_>, claimed: Claimed) -> Result<ClaimRow> {
        match claimed {
            Claimed::Ours(claim) => Ok(ClaimRow::Claimed(claim)),
            Claimed::Existing(Some(snap)) => Ok(ClaimRow::Existing(snap)),
            Claimed::Existing(None) => Err(Error::db_other(format!(
                "{}:{} conflicted on claim but is gone (purged meanwhile?)",
                p.job_type, p.op_key
            ))),
        }
    }

    fn enqueued(&self, p: &OpEnqueue<'_>, found: Option<Option<Snapshot>>) -> Result<Enqueued> {
        match found {
            None => Ok(Enqueued::Inserted),
            Some(Some(snap)) => Ok(Enqueued::Existing(Box::new(snap.record))),
            Some(None) => Err(Error::db_other(format!(
                "{}:{} conflicted on enqueue but is gone (purged meanwhile?)",
                p.job_type, p.op_key
            ))),
        }
    }

    /// A fenced single-row write's count: 1 changed, 0 not; more is a fault.
    fn one_or_none(&self, what: &str, job_type: &str, op_key: &str, n: u64) -> Result<bool> {
        match n {
            0 => Ok(false),
            1 => Ok(true),
            n => Err(Error::db_other(format!(
                "{what} of {job_type}:{op_key} affected {n} rows"
            ))),
        }
    }
}
