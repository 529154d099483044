//! The storage interface every database implements, and its parameters.
//!
//! A store runs one conditional statement per call and reports what the
//! database did; the decisions (who acts, which policy applies) are made by
//! [`crate::Guard`] and [`crate::ops`], the same for every database.
//! `onceonly-conformance` is the suite every store must pass.

use std::future::Future;
use std::ops::DerefMut;
use std::time::Duration;

use tracing::warn;

use crate::audit::{AuditEvent, AuditKind};
use crate::error::Result;
pub use crate::protocol::{OpMove, OpTakeOver};
use crate::record::{DbTime, Record, Snapshot, State};

/// A claim this worker now holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// The fencing token every later write must name.
    pub token: i64,
    /// How many claims the operation has seen, this one included.
    pub attempts: i64,
    /// When the claim was taken (database clock).
    pub claimed_at: DbTime,
    /// Until when the claim is live (database clock).
    pub lease_until: DbTime,
}

/// What a claim statement found.
#[derive(Debug, Clone, PartialEq)]
pub enum ClaimRow {
    /// The statement changed one row: the claim is ours.
    Claimed(Claim),
    /// The statement changed nothing: the row as it stands.
    Existing(Box<Snapshot>),
}

/// Parameters of [`Store::op_claim`]: insert the record claimed, or claim it
/// when it is queued and due and its fingerprint matches.
#[derive(Debug, Clone)]
pub struct OpClaim<'a> {
    /// Job type.
    pub job_type: &'a str,
    /// Operation key.
    pub op_key: &'a str,
    /// Payload fingerprint; a queued row with another one is not claimed.
    pub fingerprint: &'a str,
    /// Canonical payload JSON, stored on insert.
    pub payload: Option<&'a str>,
    /// Who claims.
    pub owner: &'a str,
    /// Lease length from the database's now.
    pub lease: Duration,
}

/// Parameters of [`Store::op_heartbeat`].
#[derive(Debug, Clone)]
pub struct OpHeartbeat<'a> {
    /// Job type.
    pub job_type: &'a str,
    /// Operation key.
    pub op_key: &'a str,
    /// The token held.
    pub token: i64,
    /// New lease from the database's now.
    pub lease: Duration,
}

/// What a renewed lease says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heartbeat {
    /// The new end of the lease.
    pub lease_until: DbTime,
    /// An operator asked to cancel.
    pub cancel_requested: bool,
}

/// Parameters of [`Store::op_enqueue`]: insert a queued record unless one exists.
#[derive(Debug, Clone)]
pub struct OpEnqueue<'a> {
    /// Job type.
    pub job_type: &'a str,
    /// Operation key.
    pub op_key: &'a str,
    /// Payload fingerprint.
    pub fingerprint: &'a str,
    /// Canonical payload JSON.
    pub payload: Option<&'a str>,
    /// Not claimable before now + this delay.
    pub delay: Option<Duration>,
}

/// What an enqueue found.
#[derive(Debug, Clone, PartialEq)]
pub enum Enqueued {
    /// A new queued record.
    Inserted,
    /// A record with this job type and key already existed.
    Existing(Box<Record>),
}

/// Parameters of [`Store::op_claim_batch`]: claim up to `limit` due queued rows.
#[derive(Debug, Clone)]
pub struct OpClaimBatch<'a> {
    /// Job type.
    pub job_type: &'a str,
    /// Who claims.
    pub owner: &'a str,
    /// Lease of each claim.
    pub lease: Duration,
    /// At most this many rows.
    pub limit: u32,
}

/// One completion in [`OpCompleteBatch`].
#[derive(Debug, Clone)]
pub struct Completion<'a> {
    /// Operation key.
    pub op_key: &'a str,
    /// The claim's token.
    pub token: i64,
    /// External reference to record.
    pub external_ref: Option<&'a str>,
    /// Result JSON to record.
    pub result: &'a str,
}

/// Parameters of [`Store::op_complete_batch`]: complete many claims of one
/// job type, each only if still claimed with its token and no cancel asked.
#[derive(Debug, Clone)]
pub struct OpCompleteBatch<'a> {
    /// Job type.
    pub job_type: &'a str,
    /// The completions.
    pub items: &'a [Completion<'a>],
}

/// Parameters of [`Store::op_list`].
#[derive(Debug, Clone, Default)]
pub struct OpList<'a> {
    /// Only this job type.
    pub job_type: Option<&'a str>,
    /// Only this state.
    pub state: Option<State>,
    /// Only claims whose lease is over (stuck).
    pub lease_expired: bool,
    /// At most this many rows (all when `None`).
    pub limit: Option<u32>,
}

/// Parameters of [`Store::op_purge`].
#[derive(Debug, Clone)]
pub struct OpPurge<'a> {
    /// Only this job type (all when `None`).
    pub job_type: Option<&'a str>,
    /// Delete finished records not updated for this long.
    pub older_than: Duration,
}

/// Parameters of [`Store::op_request_cancel`].
#[derive(Debug, Clone)]
pub struct OpRequestCancel<'a> {
    /// Job type.
    pub job_type: &'a str,
    /// Operation key.
    pub op_key: &'a str,
    /// The live claim's token.
    pub token: i64,
}

/// Parameters of [`Store::op_audit`]: one event appended to the audit trail.
#[derive(Debug, Clone)]
pub struct OpAudit<'a> {
    /// Job type.
    pub job_type: &'a str,
    /// Operation key.
    pub op_key: &'a str,
    /// What happened.
    pub event: AuditKind,
    /// Who did it.
    pub actor: &'a str,
    /// The token it was done under.
    pub token: i64,
    /// The state before.
    pub from: Option<State>,
    /// The state after.
    pub to: Option<State>,
    /// Why, in words.
    pub detail: Option<&'a str>,
    /// For a release: the claim's attempt number.
    pub attempt: Option<i64>,
    /// For a release: how long until the operation is due again.
    pub retry_after: Option<Duration>,
}

/// A database that holds operation records.
///
/// Every method that changes a row is one conditional statement and says
/// whether it changed it; none overwrites a row the caller does not own.
/// Times come from the database's clock plus [`Store::clock_offset`], which
/// tests move instead of sleeping.
pub trait Store: Send + Sync + 'static {
    /// A connection the user's own transaction runs on (for local effects).
    type Conn: Send;
    /// The user's transaction type.
    type Tx: DerefMut<Target = Self::Conn> + Send;

    /// Creates or upgrades the tables; safe to run any number of times.
    fn migrate(&self) -> impl Future<Output = Result<()>> + Send;

    /// Starts a transaction on the store's pool.
    fn begin(&self) -> impl Future<Output = Result<Self::Tx>> + Send;

    /// Commits a transaction started by [`Store::begin`].
    fn commit(tx: Self::Tx) -> impl Future<Output = Result<()>> + Send;

    /// Claims the operation (see [`OpClaim`]).
    fn op_claim(&self, p: &OpClaim<'_>) -> impl Future<Output = Result<ClaimRow>> + Send;

    /// [`Store::op_claim`] inside the caller's transaction.
    fn op_claim_in(
        &self,
        conn: &mut Self::Conn,
        p: &OpClaim<'_>,
    ) -> impl Future<Output = Result<ClaimRow>> + Send;

    /// Takes over a claim whose lease is over; `Some` with the new claim when
    /// this caller won (see [`OpTakeOver`]).
    fn op_take_over(
        &self,
        p: &OpTakeOver<'_>,
    ) -> impl Future<Output = Result<Option<Claim>>> + Send;

    /// One fenced transition; `true` when the row changed (see [`OpMove`]).
    fn op_move(&self, p: &OpMove<'_>) -> impl Future<Output = Result<bool>> + Send;

    /// [`Store::op_move`] inside the caller's transaction.
    fn op_move_in(
        &self,
        conn: &mut Self::Conn,
        p: &OpMove<'_>,
    ) -> impl Future<Output = Result<bool>> + Send;

    /// Renews a live claim's lease; `None` when the claim is no longer ours.
    fn op_heartbeat(
        &self,
        p: &OpHeartbeat<'_>,
    ) -> impl Future<Output = Result<Option<Heartbeat>>> + Send;

    /// Marks a live claim cancel-requested; `true` when the row changed.
    fn op_request_cancel(
        &self,
        p: &OpRequestCancel<'_>,
    ) -> impl Future<Output = Result<bool>> + Send;

    /// Reads one record with the database's time.
    fn op_get(
        &self,
        job_type: &str,
        op_key: &str,
    ) -> impl Future<Output = Result<Option<Snapshot>>> + Send;

    /// [`Store::op_get`] inside the caller's transaction.
    fn op_get_in(
        &self,
        conn: &mut Self::Conn,
        job_type: &str,
        op_key: &str,
    ) -> impl Future<Output = Result<Option<Snapshot>>> + Send;

    /// Lists records, oldest update first.
    fn op_list(&self, p: &OpList<'_>) -> impl Future<Output = Result<Vec<Record>>> + Send;

    /// Deletes completed, failed and cancelled records older than the
    /// retention, with their audit trail; never claimed, queued or held
    /// ones. Returns how many records.
    fn op_purge(&self, p: &OpPurge<'_>) -> impl Future<Output = Result<u64>> + Send;

    /// Inserts a queued record unless one exists (see [`OpEnqueue`]).
    fn op_enqueue(&self, p: &OpEnqueue<'_>) -> impl Future<Output = Result<Enqueued>> + Send;

    /// [`Store::op_enqueue`] inside the caller's transaction (outbox).
    fn op_enqueue_in(
        &self,
        conn: &mut Self::Conn,
        p: &OpEnqueue<'_>,
    ) -> impl Future<Output = Result<Enqueued>> + Send;

    /// Claims up to `limit` due queued records, each with its own new token.
    fn op_claim_batch(
        &self,
        p: &OpClaimBatch<'_>,
    ) -> impl Future<Output = Result<Vec<(Record, Claim)>>> + Send;

    /// Completes many claims in one statement (or one transaction); returns
    /// the keys it completed. A key missing from the answer was not ours to
    /// complete, or has a cancel requested: the caller reads it and decides.
    fn op_complete_batch(
        &self,
        p: &OpCompleteBatch<'_>,
    ) -> impl Future<Output = Result<Vec<String>>> + Send;

    /// Appends one event to the audit trail, timed by the database's clock
    /// (with the offset). Append-only: nothing is ever updated there.
    fn op_audit(&self, p: &OpAudit<'_>) -> impl Future<Output = Result<()>> + Send;

    /// The audit trail of one operation, oldest first.
    fn op_history(
        &self,
        job_type: &str,
        op_key: &str,
    ) -> impl Future<Output = Result<Vec<AuditEvent>>> + Send;

    /// The database's clock now (with the offset).
    fn now(&self) -> impl Future<Output = Result<DbTime>> + Send;

    /// The shift added to the database's clock, in milliseconds. Tests move it
    /// to expire leases without sleeping; every process sharing a database in
    /// production leaves it at 0.
    fn clock_offset(&self) -> &ClockOffset;
}

/// A shift of the database's clock, shared by clones of a store.
#[derive(Debug, Default, Clone)]
pub struct ClockOffset(std::sync::Arc<std::sync::atomic::AtomicI64>);

impl ClockOffset {
    /// The shift in milliseconds.
    pub fn millis(&self) -> i64 {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Moves the clock forward.
    pub fn advance(&self, by: Duration) {
        self.0
            .fetch_add(by.as_millis() as i64, std::sync::atomic::Ordering::SeqCst);
    }

    /// Moves the clock back (tests that write rows "in the past", so that a
    /// process on the real clock sees them as older).
    pub fn rewind(&self, by: Duration) {
        self.0
            .fetch_sub(by.as_millis() as i64, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Appends an event; a failed append is logged and otherwise ignored, so it
/// never turns a transition that happened into an error.
pub(crate) async fn append<S: Store>(store: &S, p: &OpAudit<'_>) {
    if let Err(e) = store.op_audit(p).await {
        warn!(job = p.job_type, key = p.op_key, event = %p.event, token = p.token, error = %e, "audit append failed; the transition itself stands");
    }
}
