//! onceonly's [`Store`] for SQLite, the embedded default.
//!
//! One file, created if missing, in WAL mode. The store's own calls run on
//! one connection of its own, on a thread of its own, and calls that arrive
//! together share one commit (see `writer.rs`: this is what makes SQLite
//! fast here). The user's own transactions (local effects, the outbox) run
//! on an sqlx pool on the same file, of one connection by default: SQLite
//! admits one writer at a time, and the two wait for each other on SQLite's
//! busy timeout, as other processes on the file do.
//!
//! Do not call the store's own methods while holding a transaction of its
//! pool open: both need the file's write lock, and the call would wait for
//! the transaction that waits for it, until the busy timeout.
//!
//! ```no_run
//! # async fn demo() -> onceonly::Result<()> {
//! use onceonly_sqlite::SqliteStore;
//! use onceonly::Store;
//! let store = SqliteStore::connect("sqlite://onceonly.db").await?;
//! store.migrate().await?;
//! # Ok(()) }
//! ```
//!
//! ## A local effect: claim, your write and completion in one transaction
//!
//! [`Guard::run_local`](onceonly::Guard::run_local) opens a transaction on
//! the store's pool, claims, runs your closure on that transaction's
//! connection, completes and commits; an error from the closure rolls all of
//! it back ([`onceonly::Error::LocalEffect`] keeps your error as its source).
//!
//! ```no_run
//! # async fn demo(store: onceonly_sqlite::SqliteStore) -> onceonly::Result<()> {
//! use onceonly::{EffectCtx, EffectKind, Guard, JobSpec, Outcome, Payload};
//! let guard = Guard::new(store, JobSpec::new("add_loyalty_points", EffectKind::Local))?;
//! let payload = Payload::parse(r#"{"customer": 7, "points": 50}"#)?;
//! let outcome = guard
//!     .run_local("order-42", &payload, |conn, ctx: &EffectCtx| {
//!         Box::pin(async move {
//!             sqlx::query("INSERT INTO points (op_key, customer, points) VALUES (?1, ?2, ?3)")
//!                 .bind(&ctx.op_key)
//!                 .bind(ctx.payload["customer"].as_i64())
//!                 .bind(ctx.payload["points"].as_i64())
//!                 .execute(&mut *conn)
//!                 .await?;
//!             Ok(serde_json::json!({ "added": 50 }))
//!         })
//!     })
//!     .await?;
//! // A redelivery finds it done and gets the stored result back.
//! assert!(matches!(outcome, Outcome::Done { .. }));
//! # Ok(()) }
//! ```
//!
//! ## In a transaction of your own
//!
//! [`Guard::claim_in`](onceonly::Guard::claim_in) and
//! [`Guard::complete_in`](onceonly::Guard::complete_in) do the same inside a
//! transaction you opened, with other writes of yours around them.
//!
//! ```no_run
//! # async fn demo(store: onceonly_sqlite::SqliteStore) -> Result<(), Box<dyn std::error::Error>> {
//! use onceonly::{EffectKind, Guard, JobSpec, LocalStart, Payload};
//! let guard = Guard::new(store.clone(), JobSpec::new("ledger_entry", EffectKind::Local))?;
//! let mut tx = store.pool().begin().await?;
//! match guard.claim_in(&mut tx, "invoice-9", &Payload::none()).await? {
//!     LocalStart::Claimed(claim) => {
//!         sqlx::query("INSERT INTO ledger (op_key, cents) VALUES (?1, 1200)")
//!             .bind(&claim.ctx.op_key)
//!             .execute(&mut *tx)
//!             .await?;
//!         guard.complete_in(&mut tx, &claim, &serde_json::Value::Null).await?;
//!         tx.commit().await?;
//!     }
//!     LocalStart::Settled(outcome) => println!("nothing to do: {outcome:?}"),
//! }
//! # Ok(()) }
//! ```
//!
//! ## The outbox: queue an outside call with your business write
//!
//! [`onceonly::ops::enqueue_in`] queues the operation in your transaction:
//! it exists if and only if your write commits. `onceonly run` (or a
//! [`Relay`](onceonly::relay::Relay) in your process) then sends it once.
//!
//! ```no_run
//! # async fn demo(store: onceonly_sqlite::SqliteStore) -> Result<(), Box<dyn std::error::Error>> {
//! use onceonly::{ops, Payload};
//! let mut tx = store.pool().begin().await?;
//! sqlx::query("UPDATE orders SET state = 'paid' WHERE id = 42")
//!     .execute(&mut *tx)
//!     .await?;
//! let payload = Payload::parse(r#"{"order": 42, "to": "ana@example.com"}"#)?;
//! ops::enqueue_in(&store, &mut tx, "send_receipt", "order-42", &payload, None).await?;
//! tx.commit().await?;
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]

mod checkpoint;
mod direct;
mod file_mode;
mod in_tx;
mod operator;
mod queries;
mod writer;

/// The statements that decide who acts, and the clock a new claim binds.
mod sql {
    /// Claim: insert claimed, or claim a queued row (see `queries/claim.sql`).
    pub const CLAIM: &str = include_str!("../queries/claim.sql");
    /// Claim a new record: a plain insert, the clock bound as `?8` (see
    /// `queries/claim_new.sql`); what the store runs first.
    pub const CLAIM_NEW: &str = include_str!("../queries/claim_new.sql");
    /// One fenced transition (see `queries/move.sql`).
    pub const MOVE: &str = include_str!("../queries/move.sql");

    /// SQLite's clock in ms, as `CLAIM_NEW` binds it: `unixepoch('subsec')`
    /// reads this same wall clock (the OS's real-time clock), truncated to
    /// the millisecond the same way.
    pub fn clock_ms() -> i64 {
        let since_epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        i64::try_from(since_epoch.as_millis()).unwrap_or(i64::MAX)
    }
}

use std::str::FromStr;
use std::time::Duration;

use onceonly::store::{
    Claim, ClaimRow, Enqueued, Heartbeat, OpAudit, OpClaim, OpClaimBatch, OpCompleteBatch,
    OpEnqueue, OpHeartbeat, OpList, OpMove, OpPurge, OpRequestCancel, OpTakeOver,
};
use onceonly::{AuditEvent, ClockOffset, DbTime, Error, Move, Record, Result, Snapshot, Store};
use onceonly_sqlx::{map_err, Migration};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Sqlite, SqliteConnection, SqlitePool, Transaction};

use crate::writer::Writer;

/// How long a writer waits for another connection's write lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

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
    Migration {
        version: 3,
        name: "fewer_btrees",
        sql: include_str!("../migrations/0003_fewer_btrees.sql"),
    },
    Migration {
        version: 4,
        name: "no_in_lists",
        sql: include_str!("../migrations/0004_no_in_lists.sql"),
    },
    Migration {
        version: 5,
        name: "operator",
        sql: include_str!("../migrations/0005_operator.sql"),
    },
    Migration {
        version: 6,
        name: "audit_release",
        sql: include_str!("../migrations/0006_audit_release.sql"),
    },
];

/// A [`Store`] on one SQLite file.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    writer: Writer,
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

    /// Like [`SqliteStore::connect`] with `connections` pooled connections
    /// for the user's own transactions.
    pub async fn connect_with(url: &str, connections: u32) -> Result<Self> {
        if url.contains(":memory:") || url.contains("mode=memory") {
            return Err(Error::Invalid(format!(
                "{:?} is an in-memory SQLite database: onceonly needs a file, \
                 which its own connection and the pool's both open",
                onceonly::db_url::redact(url)
            )));
        }
        let options = SqliteConnectOptions::from_str(url)
            .map_err(|e| {
                Error::Invalid(format!(
                    "{:?} is not a SQLite URL: {e}",
                    onceonly::db_url::redact(url)
                ))
            })?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(BUSY_TIMEOUT);
        file_mode::create_private(options.get_filename()).map_err(|e| Error::Unreachable {
            url: onceonly::db_url::redact(url),
            reason: format!("cannot create {}: {e}", options.get_filename().display()),
        })?;
        let pool = SqlitePoolOptions::new()
            .max_connections(connections.max(1))
            .acquire_timeout(Duration::from_secs(60))
            // A ping before every acquire would double the statements per call.
            .test_before_acquire(false)
            .connect_with(options.clone())
            .await
            .map_err(|e| Error::Unreachable {
                url: onceonly::db_url::redact(url),
                reason: format!("cannot open {}: {e}", options.get_filename().display()),
            })?;
        // The pool created the file and put it in WAL mode.
        let writer =
            Writer::open(options.get_filename(), BUSY_TIMEOUT).map_err(|e| Error::Unreachable {
                url: onceonly::db_url::redact(url),
                reason: e.to_string(),
            })?;
        Ok(Self {
            writer,
            pool,
            url: url.to_owned(),
            clock: ClockOffset::default(),
        })
    }

    /// Opens the file at `url` only if it exists: for commands that only
    /// read, which must not leave an empty database behind a mistyped path.
    pub async fn connect_existing(url: &str) -> Result<Self> {
        let options = SqliteConnectOptions::from_str(url).map_err(|e| {
            Error::Invalid(format!(
                "{:?} is not a SQLite URL: {e}",
                onceonly::db_url::redact(url)
            ))
        })?;
        let path = options.get_filename();
        if !path.is_file() {
            return Err(Error::Invalid(format!(
                "no SQLite database at {}: nothing to read (`onceonly migrate` creates one)",
                path.display()
            )));
        }
        Self::connect(url).await
    }

    /// Whether the file holds onceonly's tables (`migrate` has run).
    pub async fn has_tables(&self) -> Result<bool> {
        let found: Option<i64> = sqlx::query_scalar(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'onceonly_ops'",
        )
        .fetch_optional(&self.pool)
        .await
        .map_err(self.err())?;
        Ok(found.is_some())
    }

    /// Another store on the same file with its own connections, sharing this
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

    /// A `PRAGMA`'s value as the store's own connection sees it.
    pub async fn pragma(&self, name: &'static str) -> Result<String> {
        self.writer
            .read(move |c| {
                c.pragma_query_value(None, name, |row| {
                    Ok(match row.get_ref(0)? {
                        rusqlite::types::ValueRef::Integer(i) => i.to_string(),
                        other => other.as_str()?.to_owned(),
                    })
                })
            })
            .await
    }

    fn err(&self) -> impl Fn(sqlx::Error) -> Error + '_ {
        map_err(&self.url)
    }

    fn offset(&self) -> i64 {
        self.clock.millis()
    }

    fn gone(what: &str, job_type: &str, op_key: &str) -> Error {
        let why =
            format!("{job_type}:{op_key} conflicted on {what} but is gone (purged meanwhile?)");
        Error::db_other(why)
    }

    /// One statement on the store's connection; its affected-row count.
    async fn execute(&self, q: queries::Query) -> Result<u64> {
        self.writer.call(move |c| direct::execute(c, &q)).await
    }
}

impl Store for SqliteStore {
    type Conn = SqliteConnection;
    type Tx = Transaction<'static, Sqlite>;

    async fn migrate(&self) -> Result<()> {
        // BEGIN IMMEDIATE takes the write lock, so two processes migrating at
        // once apply each migration once.
        let mut tx = self.begin().await?;
        in_tx::migrate(&mut tx, MIGRATIONS)
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
        // Mapped like every other statement (the URL is not at hand here).
        tx.commit()
            .await
            .map_err(map_err("the transaction's database"))
    }

    async fn op_claim(&self, p: &OpClaim<'_>) -> Result<ClaimRow> {
        let new = queries::claim_new(self.offset(), p);
        let claim = queries::claim(self.offset(), p);
        let get = queries::get(self.offset(), p.job_type, p.op_key);
        // Insert it claimed; if it exists, claim it if it is queued; if
        // someone else has it, the row as it stands: one call, and no more
        // than one of its statements writes.
        let found = self
            .writer
            .call(move |c| {
                let (insert, inserted) = new.at(sql::clock_ms());
                if direct::execute(c, &insert)? == 1 {
                    return Ok(Some(ClaimRow::Claimed(inserted)));
                }
                if let Some(claim) = direct::optional(c, &claim, direct::claim)? {
                    return Ok(Some(ClaimRow::Claimed(claim)));
                }
                let snap = direct::optional(c, &get, direct::snapshot)?;
                Ok(snap.map(|snap| ClaimRow::Existing(Box::new(snap))))
            })
            .await?;
        found.ok_or_else(|| Self::gone("claim", p.job_type, p.op_key))
    }

    async fn op_claim_in(&self, conn: &mut SqliteConnection, p: &OpClaim<'_>) -> Result<ClaimRow> {
        let claimed = in_tx::claim(&mut *conn, &queries::claim(self.offset(), p))
            .await
            .map_err(self.err())?;
        match claimed {
            Some(claim) => Ok(ClaimRow::Claimed(claim)),
            None => match self.op_get_in(conn, p.job_type, p.op_key).await? {
                Some(snap) => Ok(ClaimRow::Existing(Box::new(snap))),
                None => Err(Self::gone("claim", p.job_type, p.op_key)),
            },
        }
    }

    async fn op_take_over(&self, p: &OpTakeOver<'_>) -> Result<Option<Claim>> {
        let q = queries::take_over(self.offset(), p);
        self.writer
            .call(move |c| direct::optional(c, &q, direct::claim))
            .await
    }

    async fn op_complete_batch(&self, p: &OpCompleteBatch<'_>) -> Result<Vec<String>> {
        // One writer at a time: single fenced moves in one call commit the
        // batch at the cost of one commit.
        let moves: Vec<(String, queries::Query)> = p
            .items
            .iter()
            .map(|c| {
                let m = Move::Complete
                    .op(p.job_type, c.op_key, c.token)
                    .with_external_ref(c.external_ref)
                    .with_result(c.result);
                (c.op_key.to_owned(), queries::move_op(self.offset(), &m))
            })
            .collect();
        self.writer
            .call_atomic(move |c| {
                let mut completed = Vec::with_capacity(moves.len());
                for (op_key, q) in moves {
                    if direct::execute(c, &q)? == 1 {
                        completed.push(op_key);
                    }
                }
                Ok(completed)
            })
            .await
    }

    async fn op_move(&self, p: &OpMove<'_>) -> Result<bool> {
        Ok(self.execute(queries::move_op(self.offset(), p)).await? == 1)
    }

    async fn op_move_in(&self, conn: &mut SqliteConnection, p: &OpMove<'_>) -> Result<bool> {
        let affected = in_tx::execute(conn, &queries::move_op(self.offset(), p))
            .await
            .map_err(self.err())?;
        Ok(affected == 1)
    }

    async fn op_heartbeat(&self, p: &OpHeartbeat<'_>) -> Result<Option<Heartbeat>> {
        let q = queries::heartbeat(self.offset(), p);
        self.writer
            .call(move |c| direct::optional(c, &q, direct::heartbeat))
            .await
    }

    async fn op_request_cancel(&self, p: &OpRequestCancel<'_>) -> Result<bool> {
        Ok(self
            .execute(queries::request_cancel(self.offset(), p))
            .await?
            == 1)
    }

    async fn op_get(&self, job_type: &str, op_key: &str) -> Result<Option<Snapshot>> {
        let q = queries::get(self.offset(), job_type, op_key);
        self.writer
            .call(move |c| direct::optional(c, &q, direct::snapshot))
            .await
    }

    async fn op_get_in(
        &self,
        conn: &mut SqliteConnection,
        job_type: &str,
        op_key: &str,
    ) -> Result<Option<Snapshot>> {
        in_tx::snapshot(conn, &queries::get(self.offset(), job_type, op_key))
            .await
            .map_err(self.err())
    }

    async fn op_list(&self, p: &OpList<'_>) -> Result<Vec<Record>> {
        let q = queries::list(self.offset(), p);
        self.writer
            .read(move |c| direct::all(c, &q, direct::record))
            .await
    }

    async fn op_purge(&self, p: &OpPurge<'_>) -> Result<u64> {
        let purge = queries::purge(self.offset(), p);
        let purge_audit = queries::purge_audit(p.job_type);
        self.writer
            .call_atomic(move |c| {
                let purged = direct::execute(c, &purge)?;
                direct::execute(c, &purge_audit)?;
                Ok(purged)
            })
            .await
    }

    async fn op_enqueue(&self, p: &OpEnqueue<'_>) -> Result<Enqueued> {
        let enqueue = queries::enqueue(self.offset(), p);
        let get = queries::get(self.offset(), p.job_type, p.op_key);
        let found = self
            .writer
            .call(move |c| {
                if direct::execute(c, &enqueue)? == 1 {
                    return Ok(Some(Enqueued::Inserted));
                }
                let snap = direct::optional(c, &get, direct::snapshot)?;
                Ok(snap.map(|snap| Enqueued::Existing(Box::new(snap.record))))
            })
            .await?;
        found.ok_or_else(|| Self::gone("enqueue", p.job_type, p.op_key))
    }

    async fn op_enqueue_in(
        &self,
        conn: &mut SqliteConnection,
        p: &OpEnqueue<'_>,
    ) -> Result<Enqueued> {
        let inserted = in_tx::execute(&mut *conn, &queries::enqueue(self.offset(), p))
            .await
            .map_err(self.err())?;
        if inserted == 1 {
            return Ok(Enqueued::Inserted);
        }
        match self.op_get_in(conn, p.job_type, p.op_key).await? {
            Some(snap) => Ok(Enqueued::Existing(Box::new(snap.record))),
            None => Err(Self::gone("enqueue", p.job_type, p.op_key)),
        }
    }

    async fn op_claim_batch(&self, p: &OpClaimBatch<'_>) -> Result<Vec<(Record, Claim)>> {
        let q = queries::claim_batch(self.offset(), p);
        // In a savepoint: a row that failed to decode must not leave the
        // rows before it claimed with nobody acting on them.
        self.writer
            .call_atomic(move |c| {
                direct::all(c, &q, |row| Ok((direct::record(row)?, direct::claim(row)?)))
            })
            .await
    }

    async fn op_audit(&self, p: &OpAudit<'_>) -> Result<()> {
        let affected = self.execute(queries::audit(self.offset(), p)).await?;
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
        let q = queries::history(job_type, op_key);
        self.writer
            .read(move |c| direct::all(c, &q, direct::audit_event))
            .await
    }

    async fn now(&self) -> Result<DbTime> {
        let q = queries::now(self.offset());
        let now = self
            .writer
            .call(move |c| direct::optional(c, &q, direct::now))
            .await?;
        now.ok_or_else(|| Error::db_other("SELECT now returned no row"))
    }

    fn clock_offset(&self) -> &ClockOffset {
        &self.clock
    }
}
