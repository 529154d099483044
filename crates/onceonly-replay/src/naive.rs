//! The naive version's state: read it, then act, then write it, with nothing
//! in between to stop a second worker. The harness hands one to
//! [`crate::ReplayJob::deliver_naive`] so the naive version of a job can be
//! crashed at the same points as the guarded one.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use onceonly::store::{ClaimRow, OpClaim, OpMove};
use onceonly::{Error, FaultAction, FaultPoint, Payload, State, Store};

/// An async hook called at the naive version's crash points.
pub type NaiveHook =
    Arc<dyn Fn(FaultPoint) -> Pin<Box<dyn Future<Output = FaultAction> + Send>> + Send + Sync>;

/// A "done" marker per operation key, read and written without a claim:
/// the check-then-act pattern the guard replaces.
///
/// It lives in the store's own table under the job type `JOB.naive`, so it
/// needs no table of its own. Its crash points mirror the guard's:
/// [`FaultPoint::AfterClaim`] fires in [`Naive::done`] after the read (the
/// worker is about to act), [`FaultPoint::AfterEffect`] fires in
/// [`Naive::mark_done`] before the write (the worker has acted).
pub struct Naive<S: Store> {
    store: S,
    job_type: String,
    hook: Option<NaiveHook>,
}

impl<S: Store> Naive<S> {
    /// The naive state of `job_type` (stored as `JOB_TYPE.naive`) on `store`.
    pub fn new(store: S, job_type: &str) -> Self {
        Self {
            store,
            job_type: format!("{job_type}.naive"),
            hook: None,
        }
    }

    /// Calls `hook` at the naive version's crash points.
    pub fn with_hook(mut self, hook: NaiveHook) -> Self {
        self.hook = Some(hook);
        self
    }

    /// The store, for the job's own writes (this worker's connection).
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The job type the markers are stored under.
    pub fn job_type(&self) -> &str {
        &self.job_type
    }

    async fn point(&self, point: FaultPoint) -> onceonly::Result<()> {
        match &self.hook {
            Some(hook) if hook(point).await == FaultAction::Crash => {
                Err(Error::InjectedCrash(point))
            }
            _ => Ok(()),
        }
    }

    /// True when the marker says the operation was done. Nothing stops
    /// another worker from reading the same answer at the same time.
    pub async fn done(&self, op_key: &str) -> onceonly::Result<bool> {
        let done = self
            .store
            .op_get(&self.job_type, op_key)
            .await?
            .is_some_and(|snap| snap.record.state == State::Completed);
        if !done {
            self.point(FaultPoint::AfterClaim).await?;
        }
        Ok(done)
    }

    /// Marks the operation done, overwriting whatever the marker said.
    pub async fn mark_done(&self, op_key: &str, payload: &Payload) -> onceonly::Result<()> {
        self.point(FaultPoint::AfterEffect).await?;
        let insert = OpClaim {
            job_type: &self.job_type,
            op_key,
            fingerprint: &payload.fingerprint,
            payload: payload.json.as_deref(),
            owner: "naive",
            lease: Duration::from_secs(3600),
        };
        let (token, from) = match self.store.op_claim(&insert).await? {
            ClaimRow::Claimed(claim) => (claim.token, State::Claimed),
            ClaimRow::Existing(snap) => (snap.record.token, snap.record.state),
        };
        self.store
            .op_move(&OpMove::new(
                &self.job_type,
                op_key,
                token,
                from,
                State::Completed,
            ))
            .await?;
        Ok(())
    }

    /// Marks the operation failed, overwriting whatever the marker said (a
    /// late failure report, as a naive worker writes it).
    pub async fn mark_failed(&self, op_key: &str, error: &str) -> onceonly::Result<()> {
        if let Some(snap) = self.store.op_get(&self.job_type, op_key).await? {
            let r = snap.record;
            let mut p = OpMove::new(&self.job_type, op_key, r.token, r.state, State::Failed);
            p.error = Some(error);
            self.store.op_move(&p).await?;
        }
        Ok(())
    }
}

/// A hook that crashes the naive version at `point`.
pub fn crash_at(point: FaultPoint) -> NaiveHook {
    Arc::new(move |p| {
        Box::pin(async move {
            if p == point {
                FaultAction::Crash
            } else {
                FaultAction::Continue
            }
        })
    })
}
