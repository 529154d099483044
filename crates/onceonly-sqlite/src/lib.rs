//! onceonly's [`Store`] for SQLite, the embedded default.
//!
//! One file, created if missing, in WAL mode. The pool has a single
//! connection by default: SQLite admits one writer at a time, and queueing
//! in the pool is fairer and faster than contending on the file lock. Other
//! processes on the same file wait on SQLite's busy timeout.
//!
//! ```no_run
//! # async fn demo() -> onceonly::Result<()> {
//! use onceonly_sqlite::SqliteStore;
//! use onceonly::Store;
//! let store = SqliteStore::connect("sqlite://onceonly.db").await?;
//! store.migrate().await?;
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]

mod queries;

/// The SQL text of the statements that decide who acts, for baselines
/// (the bench runs them raw next to the guard).
pub mod sql {
    /// Claim: insert claimed, or claim a queued row (see `queries/claim.sql`).
    pub const CLAIM: &str = include_str!("../queries/claim.sql");
    /// One fenced transition (see `queries/move.sql`).
    pub const MOVE: &str = include_str!("../queries/move.sql");
}

use std::str::FromStr;
use std::time::Duration;

use onceonly::store::{
    Claim, ClaimRow, Enqueued, Heartbeat, OpAudit, OpClaim, OpClaimBatch, OpCompleteBatch,
    OpEnqueue, OpHeartbeat, OpList, OpMove, OpPurge, OpRequestCancel, OpTakeOver,
};
use onceonly::{AuditEvent, ClockOffset, DbTime, Error, Record, Result, Snapshot, State, Store};
use onceonly_sqlx::{map_err, Migration};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Sqlite, SqliteConnection, SqlitePool, Transaction};

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

/// A [`Store`] on one SQLite file.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
    url: String,
    clock: ClockOffset,
}

impl SqliteStore {
    /// Opens (creating if missing) the file at `url`: `sqlite://PATH`
    /// (relative) or `sqlite:///ABS/PATH`.
    pub async fn connect(url: &str) -> Result<Self> {
        Self::connect_with(url, 1).await
    }

    /// Like [`SqliteStore::connect`] with `connections` pooled connections.
    pub async fn connect_with(url: &str, connections: u32) -> Result<Self> {
        let options = SqliteConnectOptions::from_str(url)
            .map_err(|e| Error::Invalid(format!("{url:?} is not a SQLite URL: {e}")))?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(30));
        let pool = SqlitePoolOptions::new()
            .max_connections(connections.max(1))
            .acquire_timeout(Duration::from_secs(60))
            // A ping before every acquire would double the statements per call.
            .test_before_acquire(false)
            .connect_with(options)
            .await
            .map_err(map_err(url))?;
        Ok(Self {
            pool,
            url: url.to_owned(),
            clock: ClockOffset::default(),
        })
    }

    /// Another store on the same file with its own connection, sharing this
    /// store's clock offset (a second worker, in tests).
    pub async fn reconnect(&self) -> Result<Self> {
        let mut other = Self::connect(&self.url).await?;
        other.clock = self.clock.clone();
        Ok(other)
    }

    /// The pool, for the user's own queries.
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    fn err(&self) -> impl Fn(sqlx::Error) -> Error + '_ {
        map_err(&self.url)
    }

    async fn conn(&self) -> Result<sqlx::pool::PoolConnection<Sqlite>> {
        self.pool.acquire().await.map_err(self.err())
    }

    fn offset(&self) -> i64 {
        self.clock.millis()
    }
}

impl Store for SqliteStore {
    type Conn = SqliteConnection;
    type Tx = Transaction<'static, Sqlite>;

    async fn migrate(&self) -> Result<()> {
        // BEGIN IMMEDIATE takes the write lock, so two processes migrating at
        // once apply each migration once.
        let mut tx = self.begin().await?;
        queries::migrate(&mut tx, MIGRATIONS)
            .await
            .map_err(self.err())?;
        Self::commit(tx).await
    }

    async fn begin(&self) -> Result<Self::Tx> {
        // IMMEDIATE: a deferred transaction that later writes can fail with
        // SQLITE_BUSY instead of waiting.
        self.pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(self.err())
    }

    async fn commit(tx: Self::Tx) -> Result<()> {
        tx.commit()
            .await
            .map_err(|e| Error::Database(e.to_string()))
    }

    async fn op_claim(&self, p: &OpClaim<'_>) -> Result<ClaimRow> {
        let mut conn = self.conn().await?;
        self.op_claim_in(&mut conn, p).await
    }

    async fn op_claim_in(&self, conn: &mut SqliteConnection, p: &OpClaim<'_>) -> Result<ClaimRow> {
        let claimed = queries::claim(&mut *conn, self.offset(), p)
            .await
            .map_err(self.err())?;
        match claimed {
            Some(claim) => Ok(ClaimRow::Claimed(claim)),
            None => match self.op_get_in(conn, p.job_type, p.op_key).await? {
                Some(snap) => Ok(ClaimRow::Existing(Box::new(snap))),
                None => Err(Error::Database(format!(
                    "{}:{} conflicted on claim but is gone (purged meanwhile?)",
                    p.job_type, p.op_key
                ))),
            },
        }
    }

    async fn op_take_over(&self, p: &OpTakeOver<'_>) -> Result<Option<Claim>> {
        queries::take_over(&mut *self.conn().await?, self.offset(), p)
            .await
            .map_err(self.err())
    }

    async fn op_complete_batch(&self, p: &OpCompleteBatch<'_>) -> Result<Vec<String>> {
        // One writer at a time: one transaction of single fenced moves
        // commits the batch at the cost of one commit.
        let mut tx = self.begin().await?;
        let mut completed = Vec::with_capacity(p.items.len());
        for c in p.items {
            let mut m = OpMove::new(
                p.job_type,
                c.op_key,
                c.token,
                State::Claimed,
                State::Completed,
            );
            m.unless_cancel_requested = true;
            m.external_ref = c.external_ref;
            m.result = Some(c.result);
            if queries::move_op(&mut tx, self.offset(), &m)
                .await
                .map_err(self.err())?
                == 1
            {
                completed.push(c.op_key.to_owned());
            }
        }
        Self::commit(tx).await?;
        Ok(completed)
    }

    async fn op_move(&self, p: &OpMove<'_>) -> Result<bool> {
        let affected = queries::move_op(&mut *self.conn().await?, self.offset(), p)
            .await
            .map_err(self.err())?;
        Ok(affected == 1)
    }

    async fn op_move_in(&self, conn: &mut SqliteConnection, p: &OpMove<'_>) -> Result<bool> {
        let affected = queries::move_op(conn, self.offset(), p)
            .await
            .map_err(self.err())?;
        Ok(affected == 1)
    }

    async fn op_heartbeat(&self, p: &OpHeartbeat<'_>) -> Result<Option<Heartbeat>> {
        queries::heartbeat(&mut *self.conn().await?, self.offset(), p)
            .await
            .map_err(self.err())
    }

    async fn op_request_cancel(&self, p: &OpRequestCancel<'_>) -> Result<bool> {
        let affected = queries::request_cancel(&mut *self.conn().await?, self.offset(), p)
            .await
            .map_err(self.err())?;
        Ok(affected == 1)
    }

    async fn op_get(&self, job_type: &str, op_key: &str) -> Result<Option<Snapshot>> {
        queries::get(&mut *self.conn().await?, self.offset(), job_type, op_key)
            .await
            .map_err(self.err())
    }

    async fn op_get_in(
        &self,
        conn: &mut SqliteConnection,
        job_type: &str,
        op_key: &str,
    ) -> Result<Option<Snapshot>> {
        queries::get(conn, self.offset(), job_type, op_key)
            .await
            .map_err(self.err())
    }

    async fn op_list(&self, p: &OpList<'_>) -> Result<Vec<Record>> {
        queries::list(&mut *self.conn().await?, self.offset(), p)
            .await
            .map_err(self.err())
    }

    async fn op_purge(&self, p: &OpPurge<'_>) -> Result<u64> {
        let mut tx = self.begin().await?;
        let purged = queries::purge(&mut tx, self.offset(), p)
            .await
            .map_err(self.err())?;
        queries::purge_audit(&mut tx, p.job_type)
            .await
            .map_err(self.err())?;
        Self::commit(tx).await?;
        Ok(purged)
    }

    async fn op_enqueue(&self, p: &OpEnqueue<'_>) -> Result<Enqueued> {
        let mut conn = self.conn().await?;
        self.op_enqueue_in(&mut conn, p).await
    }

    async fn op_enqueue_in(
        &self,
        conn: &mut SqliteConnection,
        p: &OpEnqueue<'_>,
    ) -> Result<Enqueued> {
        if queries::enqueue(&mut *conn, self.offset(), p)
            .await
            .map_err(self.err())?
            == 1
        {
            return Ok(Enqueued::Inserted);
        }
        match self.op_get_in(conn, p.job_type, p.op_key).await? {
            Some(snap) => Ok(Enqueued::Existing(Box::new(snap.record))),
            None => Err(Error::Database(format!(
                "{}:{} conflicted on enqueue but is gone (purged meanwhile?)",
                p.job_type, p.op_key
            ))),
        }
    }

    async fn op_claim_batch(&self, p: &OpClaimBatch<'_>) -> Result<Vec<(Record, Claim)>> {
        queries::claim_batch(&mut *self.conn().await?, self.offset(), p)
            .await
            .map_err(self.err())
    }

    async fn op_audit(&self, p: &OpAudit<'_>) -> Result<()> {
        let affected = queries::audit(&mut *self.conn().await?, self.offset(), p)
            .await
            .map_err(self.err())?;
        if affected == 1 {
            Ok(())
        } else {
            Err(Error::Database(format!(
                "audit append for {}:{} inserted {affected} rows",
                p.job_type, p.op_key
            )))
        }
    }

    async fn op_history(&self, job_type: &str, op_key: &str) -> Result<Vec<AuditEvent>> {
        queries::history(&mut *self.conn().await?, job_type, op_key)
            .await
            .map_err(self.err())
    }

    async fn now(&self) -> Result<DbTime> {
        queries::now(&mut *self.conn().await?, self.offset())
            .await
            .map_err(self.err())
    }

    fn clock_offset(&self) -> &ClockOffset {
        &self.clock
    }
}
