//! A store that runs a hook right after each batch claim (it opens the
//! window between a relay's claim and its next step, deterministically, so
//! a case can put an operator's action there) and one before each
//! completion, counts the batch claims begun, and can fail every heartbeat
//! (the database unreachable from one worker only).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use onceonly::store::{
    Claim, ClaimRow, Enqueued, Heartbeat, OpAudit, OpClaim, OpClaimBatch, OpCompleteBatch,
    OpEnqueue, OpHeartbeat, OpList, OpMove, OpPurge, OpRequestCancel, OpTakeOver,
};
use onceonly::{AuditEvent, ClockOffset, DbTime, Record, Result, Snapshot, Store};

/// Called with the rows a batch claim took, before the claim returns.
pub(crate) type AfterClaimBatch =
    Arc<dyn Fn(Vec<(Record, Claim)>) -> futures::future::BoxFuture<'static, ()> + Send + Sync>;

/// Called with the keys about to be completed (one move to completed, or a
/// batch completion), before the store is asked.
pub(crate) type BeforeCompletion =
    Arc<dyn Fn(Vec<String>) -> futures::future::BoxFuture<'static, ()> + Send + Sync>;

/// `S`, with [`AfterClaimBatch`] run after every non-empty batch claim and
/// [`BeforeCompletion`] before every completion.
#[derive(Clone)]
pub(crate) struct Intercept<S> {
    pub(crate) inner: S,
    pub(crate) after_claim_batch: AfterClaimBatch,
    pub(crate) before_completion: BeforeCompletion,
    /// Batch claims begun so far, counted before the store is asked.
    pub(crate) claim_batches_begun: Arc<AtomicU64>,
    pub(crate) fail_heartbeats: bool,
}

impl<S> Intercept<S> {
    /// `inner` with no hooks.
    pub(crate) fn new(inner: S) -> Self {
        Self {
            inner,
            after_claim_batch: Arc::new(|_| Box::pin(async {})),
            before_completion: Arc::new(|_| Box::pin(async {})),
            claim_batches_begun: Arc::default(),
            fail_heartbeats: false,
        }
    }

    /// `inner` with no hook, every heartbeat failing.
    pub(crate) fn failing_heartbeats(inner: S) -> Self {
        Self {
            fail_heartbeats: true,
            ..Self::new(inner)
        }
    }
}

impl<S: Store + Clone> Store for Intercept<S> {
    type Conn = S::Conn;
    type Tx = S::Tx;

    async fn migrate(&self) -> Result<()> {
        self.inner.migrate().await
    }
    async fn begin(&self) -> Result<Self::Tx> {
        self.inner.begin().await
    }
    async fn commit(tx: Self::Tx) -> Result<()> {
        S::commit(tx).await
    }
    async fn op_claim(&self, p: &OpClaim<'_>) -> Result<ClaimRow> {
        self.inner.op_claim(p).await
    }
    async fn op_claim_in(&self, conn: &mut S::Conn, p: &OpClaim<'_>) -> Result<ClaimRow> {
        self.inner.op_claim_in(conn, p).await
    }
    async fn op_take_over(&self, p: &OpTakeOver<'_>) -> Result<Option<Claim>> {
        self.inner.op_take_over(p).await
    }
    async fn op_move(&self, p: &OpMove<'_>) -> Result<bool> {
        if p.to == onceonly::State::Completed {
            (self.before_completion)(vec![p.op_key.to_owned()]).await;
        }
        self.inner.op_move(p).await
    }
    async fn op_move_in(&self, conn: &mut S::Conn, p: &OpMove<'_>) -> Result<bool> {
        self.inner.op_move_in(conn, p).await
    }
    async fn op_heartbeat(&self, p: &OpHeartbeat<'_>) -> Result<Option<Heartbeat>> {
        if self.fail_heartbeats {
            return Err(onceonly::Error::db_other("heartbeat refused (test)"));
        }
        self.inner.op_heartbeat(p).await
    }
    async fn op_request_cancel(&self, p: &OpRequestCancel<'_>) -> Result<bool> {
        self.inner.op_request_cancel(p).await
    }
    async fn op_get(&self, job_type: &str, op_key: &str) -> Result<Option<Snapshot>> {
        self.inner.op_get(job_type, op_key).await
    }
    async fn op_get_in(
        &self,
        conn: &mut S::Conn,
        job_type: &str,
        op_key: &str,
    ) -> Result<Option<Snapshot>> {
        self.inner.op_get_in(conn, job_type, op_key).await
    }
    async fn op_list(&self, p: &OpList<'_>) -> Result<Vec<Record>> {
        self.inner.op_list(p).await
    }
    async fn op_purge(&self, p: &OpPurge<'_>) -> Result<u64> {
        self.inner.op_purge(p).await
    }
    async fn op_enqueue(&self, p: &OpEnqueue<'_>) -> Result<Enqueued> {
        self.inner.op_enqueue(p).await
    }
    async fn op_enqueue_in(&self, conn: &mut S::Conn, p: &OpEnqueue<'_>) -> Result<Enqueued> {
        self.inner.op_enqueue_in(conn, p).await
    }
    async fn op_claim_batch(&self, p: &OpClaimBatch<'_>) -> Result<Vec<(Record, Claim)>> {
        self.claim_batches_begun.fetch_add(1, Ordering::SeqCst);
        let claimed = self.inner.op_claim_batch(p).await?;
        if !claimed.is_empty() {
            (self.after_claim_batch)(claimed.clone()).await;
        }
        Ok(claimed)
    }
    async fn op_complete_batch(&self, p: &OpCompleteBatch<'_>) -> Result<Vec<String>> {
        let keys = p.items.iter().map(|c| c.op_key.to_owned()).collect();
        (self.before_completion)(keys).await;
        self.inner.op_complete_batch(p).await
    }
    async fn op_audit(&self, p: &OpAudit<'_>) -> Result<()> {
        self.inner.op_audit(p).await
    }
    async fn op_history(&self, job_type: &str, op_key: &str) -> Result<Vec<AuditEvent>> {
        self.inner.op_history(job_type, op_key).await
    }
    async fn now(&self) -> Result<DbTime> {
        self.inner.now().await
    }
    fn clock_offset(&self) -> &ClockOffset {
        self.inner.clock_offset()
    }
}
