//! The effect a guard protects, and what it reports.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// What one attempt at the effect reports.
#[derive(Debug, Clone, PartialEq)]
pub enum EffectOutcome {
    /// It happened. `external_ref` is its reference at the destination, if any;
    /// `result` is returned to every repeat.
    Done {
        /// The destination's reference for the effect.
        external_ref: Option<String>,
        /// What repeats get back.
        result: serde_json::Value,
    },
    /// It surely did not happen (nothing reached the destination): safe to retry.
    NotSent(String),
    /// It may have happened: treated like a crash after the effect.
    Unknown(String),
    /// It failed for good; retrying will not help.
    Failed(String),
}

impl EffectOutcome {
    /// `Done` with a reference and a null result.
    pub fn done_with_ref(external_ref: impl Into<String>) -> Self {
        EffectOutcome::Done {
            external_ref: Some(external_ref.into()),
            result: serde_json::Value::Null,
        }
    }
}

/// What a lookup by idempotency key found.
#[derive(Debug, Clone, PartialEq)]
pub enum LookupOutcome {
    /// The effect exists at the destination.
    Found {
        /// Its reference.
        external_ref: Option<String>,
        /// What repeats get back.
        result: serde_json::Value,
    },
    /// The effect surely does not exist: safe to do it.
    NotFound,
    /// The lookup could not answer; try again later.
    Unavailable(String),
}

/// What a withdraw at the destination did.
#[derive(Debug, Clone, PartialEq)]
pub enum WithdrawOutcome {
    /// The item is gone (or was never there).
    Withdrawn,
    /// The item may still be there.
    NotWithdrawn(String),
}

/// What an effect knows about the operation it acts for.
#[derive(Debug, Clone)]
pub struct EffectCtx {
    /// Job type.
    pub job_type: String,
    /// Operation key.
    pub op_key: String,
    /// The key to pass to a destination that dedups: the same on every attempt.
    pub idempotency_key: String,
    /// The fencing token of the claim this attempt runs under.
    pub token: i64,
    /// How many claims the operation has seen, this one included.
    pub attempt: i64,
    /// The payload (`null` when there is none).
    pub payload: serde_json::Value,
    pub(crate) cancel_requested: Arc<AtomicBool>,
}

impl EffectCtx {
    /// True once the guard has learned that an operator asked to cancel
    /// (heartbeats carry it). A long effect should stop before acting.
    pub fn cancel_requested(&self) -> bool {
        self.cancel_requested.load(Ordering::SeqCst)
    }

    /// A context for an operation outside a claim (cancel, tests).
    pub fn detached(job_type: &str, op_key: &str, payload: serde_json::Value) -> Self {
        Self {
            job_type: job_type.to_owned(),
            op_key: op_key.to_owned(),
            idempotency_key: crate::key::idempotency_key(job_type, op_key),
            token: 0,
            attempt: 0,
            payload,
            cancel_requested: Arc::default(),
        }
    }
}

/// A side effect at a destination outside the database.
///
/// `perform` is required. `lookup` is what effect kind `lookup` relies on;
/// `withdraw` is what cancel and compensation rely on. The defaults say they
/// are not available.
pub trait Effect: Send + Sync {
    /// Does the effect once. Pass `ctx.idempotency_key` to a destination that dedups.
    fn perform(&self, ctx: &EffectCtx) -> impl Future<Output = EffectOutcome> + Send;

    /// Looks the effect up by `ctx.idempotency_key`.
    fn lookup(&self, ctx: &EffectCtx) -> impl Future<Output = LookupOutcome> + Send {
        let _ = ctx;
        async { LookupOutcome::Unavailable("this effect has no lookup".into()) }
    }

    /// Withdraws the item `external_ref` at the destination.
    fn withdraw(
        &self,
        ctx: &EffectCtx,
        external_ref: &str,
    ) -> impl Future<Output = WithdrawOutcome> + Send {
        let _ = (ctx, external_ref);
        async { WithdrawOutcome::NotWithdrawn("this effect cannot be withdrawn".into()) }
    }
}

/// An [`Effect`] from an async closure, for effects with neither lookup nor withdraw.
pub struct EffectFn<F>(pub F);

impl<F, Fut> Effect for EffectFn<F>
where
    F: Fn(EffectCtx) -> Fut + Send + Sync,
    Fut: Future<Output = EffectOutcome> + Send,
{
    fn perform(&self, ctx: &EffectCtx) -> impl Future<Output = EffectOutcome> + Send {
        (self.0)(ctx.clone())
    }
}
