//! The guard: claim, act, then complete, release or fail, each write fenced.
//!
//! `act` runs an effect under a claim and records its outcome; `local` is
//! the in-transaction path for local effects; `batch` lets a relay complete
//! many claims in one statement.

mod act;
mod batch;
mod local;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use crate::effect::{Effect, EffectCtx, EffectOutcome};
use crate::error::{BoxError, Error, Result};
use crate::fault::{FaultHook, FaultPoint};
use crate::key::{idempotency_key, validate_op_key, Payload};
use crate::owner::new_owner;
use crate::protocol::decide::{self, Decider, Entry, Failure, Job, MoveStep, Step};
use crate::record::{DbTime, Record};
use crate::spec::{EffectKind, JobSpec};
use crate::store::{Claim, Store};
use act::claimed;

/// What became of one delivery of an operation.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Outcome {
    /// The operation is completed: by this delivery (`repeat == false`) or by
    /// an earlier one, whose stored result this is.
    Done {
        /// What the completed run returned.
        result: serde_json::Value,
        /// The effect's reference at the destination.
        external_ref: Option<String>,
        /// True when an earlier delivery did the effect.
        repeat: bool,
    },
    /// Another worker holds a live claim; leave the message for redelivery.
    InProgress {
        /// How long ago the claim was taken.
        age: Duration,
        /// How long the claim is live from when it was taken.
        lease: Duration,
        /// Who holds it.
        owner: Option<String>,
    },
    /// Nobody can tell whether the effect happened; a person must resolve it.
    Held {
        /// Why it is held.
        reason: Option<String>,
    },
    /// The operation failed for good (or the policy gave it up).
    Failed {
        /// Why.
        error: Option<String>,
    },
    /// The operation was cancelled; `withdrawn_ref` names an item withdrawn
    /// at the destination after the effect.
    Cancelled {
        /// The withdrawn item, when the effect had happened.
        withdrawn_ref: Option<String>,
    },
    /// Not done this time, safe to deliver again (the claim was released).
    RetryLater {
        /// Why.
        reason: String,
    },
    /// The operation is queued for later; its due time has not come.
    NotDue {
        /// When it may be claimed.
        due_at: Option<DbTime>,
    },
    /// A cancel was requested while the effect ran; the withdraw at the
    /// destination failed, so the record stays completed and says so.
    WithdrawFailed {
        /// The item still live at the destination.
        external_ref: Option<String>,
        /// What the withdraw said.
        error: String,
    },
}

/// What [`Guard::attempt_claimed`] did.
#[derive(Debug)]
pub enum Attempt {
    /// The effect is done and not yet recorded: complete it with
    /// [`Guard::complete_batch`].
    Done(DoneAttempt),
    /// Any other outcome, already recorded under the claim.
    Settled(Result<Outcome>),
}

/// A done effect waiting for its completion write: the delivery's machine,
/// stopped at its `move complete`.
#[derive(Debug)]
pub struct DoneAttempt {
    delivery: Box<act::Delivery>,
    complete: MoveStep,
}

impl DoneAttempt {
    /// The operation key.
    pub fn op_key(&self) -> &str {
        &self.delivery.ctx.op_key
    }
}

/// A claim taken inside the caller's transaction (local effects).
#[derive(Debug)]
pub struct LocalClaim {
    /// The delivery's machine, stopped after the claim.
    decider: Decider,
    /// What the effect may need: key, token, payload.
    pub ctx: EffectCtx,
}

/// What [`Guard::claim_in`] found.
#[derive(Debug)]
pub enum LocalStart {
    /// The claim is ours inside the transaction: do the effect, then
    /// [`Guard::complete_in`], then commit.
    Claimed(LocalClaim),
    /// Nothing to do: the operation is settled or busy.
    Settled(Outcome),
}

/// Guards one job type's effect. Cheap to share behind an `Arc`.
pub struct Guard<S: Store> {
    store: S,
    spec: JobSpec,
    owner: String,
    fault_hook: Option<FaultHook>,
}

impl<S: Store> Guard<S> {
    /// A guard for `spec` on `store`. Refuses a spec that breaks a timing rule.
    pub fn new(store: S, spec: JobSpec) -> Result<Self> {
        spec.validate()?;
        Ok(Self {
            store,
            spec,
            owner: new_owner(),
            fault_hook: None,
        })
    }

    /// Calls `hook` at every [`FaultPoint`] (tests and the replay harness).
    pub fn with_fault_hook(mut self, hook: FaultHook) -> Self {
        self.fault_hook = Some(hook);
        self
    }

    /// Names the owner written on claims (default: host, pid and a random part).
    pub fn with_owner(mut self, owner: impl Into<String>) -> Self {
        self.owner = owner.into();
        self
    }

    /// The job's spec.
    pub fn spec(&self) -> &JobSpec {
        &self.spec
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The owner written on this guard's claims.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// Runs one delivery of operation `op_key`: claims it, performs `effect`
    /// if the claim is ours, and records the outcome under the claim's token.
    ///
    /// A repeat of a completed operation returns its stored result without
    /// acting; a live claim of another worker is left alone
    /// ([`Outcome::InProgress`]); a claim past its lease is handled by the
    /// effect kind and stale-claim policy. Returns [`Error::PayloadMismatch`]
    /// when the key is stored with another payload, and [`Error::LostClaim`]
    /// when the claim was taken from this worker before it could record.
    pub async fn run<E: Effect>(
        &self,
        op_key: &str,
        payload: &Payload,
        effect: &E,
    ) -> Result<Outcome> {
        if self.spec.effect == EffectKind::Local {
            return Err(Error::Invalid(
                "a local effect runs in the caller's transaction: use run_local or claim_in".into(),
            ));
        }
        validate_op_key(op_key)?;
        let entry = Entry::Run {
            fingerprint: payload.fingerprint.clone(),
        };
        let ctx = self.ctx(op_key, None, payload);
        self.deliver(entry, ctx, Some(payload), effect).await
    }

    /// Runs the effect under a claim taken elsewhere (a relay's batch claim
    /// of queued rows), then records the outcome under the claim's token.
    pub async fn run_claimed<E: Effect>(
        &self,
        record: &Record,
        claim: &Claim,
        effect: &E,
    ) -> Result<Outcome> {
        let payload = Payload::stored(record);
        let ctx = self.ctx(&record.op_key, Some(claim), &payload);
        let entry = Entry::RunClaimed {
            claim: claimed(claim),
        };
        self.deliver(entry, ctx, None, effect).await
    }

    /// Gives back a claim taken elsewhere (a relay's batch claim) before
    /// acting on it, as when the relay stops: released to queued, due at
    /// once, or, when an operator asked to cancel it meanwhile, cancelled
    /// (nothing was sent; held instead when an earlier claim may have
    /// acted). [`Error::LostClaim`] when the claim is gone.
    pub async fn release_unstarted(
        &self,
        record: &Record,
        claim: &Claim,
        reason: &str,
    ) -> Result<Outcome> {
        let payload = Payload::stored(record);
        let ctx = self.ctx(&record.op_key, Some(claim), &payload);
        let entry = Entry::ReleaseUnstarted {
            claim: claimed(claim),
            reason: reason.to_owned(),
        };
        self.deliver(entry, ctx, None, &Unstarted).await
    }

    /// The machine of one delivery, run to its end.
    async fn deliver<E: Effect>(
        &self,
        entry: Entry,
        ctx: EffectCtx,
        payload: Option<&Payload>,
        effect: &E,
    ) -> Result<Outcome> {
        let mut delivery = act::Delivery::new(Decider::new(self.job(), entry), ctx);
        let end = self
            .drive(&mut delivery, decide::Answer::None, payload, effect, false)
            .await?;
        self.ended(&mut delivery, end)
    }

    fn job(&self) -> Job {
        Job::of(&self.spec)
    }

    /// The effect's context for `op_key`; token and attempt 0 until a
    /// claim is held.
    fn ctx(&self, op_key: &str, claim: Option<&Claim>, payload: &Payload) -> EffectCtx {
        EffectCtx {
            job_type: self.spec.job_type.clone(),
            op_key: op_key.to_owned(),
            idempotency_key: idempotency_key(&self.spec.job_type, op_key),
            token: claim.map_or(0, |c| c.token),
            attempt: claim.map_or(0, |c| c.attempts),
            payload: payload.value(),
            cancel_requested: Default::default(),
        }
    }

    /// The outcome or error the machine ended with, in the guard's types.
    fn ended(&self, delivery: &mut act::Delivery, end: Step) -> Result<Outcome> {
        match end {
            Step::Finish { outcome } => Ok(outcome_of(outcome)),
            Step::Error { error } => {
                let read = delivery.read.take();
                Err(self.error_of(&delivery.ctx.op_key, error, read, None))
            }
            other => Err(Error::db_other(format!(
                "the guard stopped at a step it did not take: {other:?}"
            ))),
        }
    }

    /// The machine's [`Failure`] as an [`Error`]: `read` is the row the
    /// last statement returned (a lost claim's row), `source` a local
    /// effect's own error.
    fn error_of(
        &self,
        op_key: &str,
        failure: Failure,
        read: Option<Record>,
        source: Option<BoxError>,
    ) -> Error {
        let not_found = || Error::NotFound {
            job_type: self.spec.job_type.clone(),
            op_key: op_key.to_owned(),
        };
        match failure {
            Failure::LostClaim { token, .. } => match read {
                Some(record) => Error::LostClaim {
                    token,
                    record: Box::new(record),
                },
                None => not_found(),
            },
            Failure::PayloadMismatch { stored, offered } => Error::PayloadMismatch {
                job_type: self.spec.job_type.clone(),
                op_key: op_key.to_owned(),
                stored,
                offered,
            },
            Failure::NotFound {} => not_found(),
            Failure::InjectedCrash { point } => Error::InjectedCrash(point),
            Failure::LocalEffectFailed { why } => Error::LocalEffect {
                job_type: self.spec.job_type.clone(),
                op_key: op_key.to_owned(),
                source: source.unwrap_or_else(|| why.into()),
            },
            Failure::Timeout { .. } => Error::Timeout(self.spec.timeout),
        }
    }
}

/// The machine's outcome as the guard's (`RetryLater` does not carry its
/// backoff: the record's `due_at` does).
fn outcome_of(outcome: decide::Outcome) -> Outcome {
    use decide::Outcome as O;
    match outcome {
        O::Done {
            result,
            external_ref,
            repeat,
        } => Outcome::Done {
            result,
            external_ref,
            repeat,
        },
        O::InProgress {
            age_ms,
            lease_ms,
            owner,
        } => Outcome::InProgress {
            age: Duration::from_millis(age_ms),
            lease: Duration::from_millis(lease_ms),
            owner,
        },
        O::Held { reason } => Outcome::Held { reason },
        O::Failed { error } => Outcome::Failed { error },
        O::Cancelled { withdrawn_ref } => Outcome::Cancelled { withdrawn_ref },
        O::RetryLater { reason, .. } => Outcome::RetryLater { reason },
        O::NotDue { due_at_ms } => Outcome::NotDue {
            due_at: due_at_ms.map(DbTime),
        },
        O::WithdrawFailed {
            external_ref,
            error,
        } => Outcome::WithdrawFailed {
            external_ref,
            error,
        },
    }
}

/// The effect of a claim given back unstarted: the machine never calls it.
struct Unstarted;

impl Effect for Unstarted {
    async fn perform(&self, _: &EffectCtx) -> EffectOutcome {
        EffectOutcome::NotSent("a claim given back unstarted is not acted on".into())
    }
}
