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
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tracing::{debug, info, warn};

use crate::audit::AuditKind;
use crate::effect::{Effect, EffectCtx, EffectOutcome, LookupOutcome, WithdrawOutcome};
use crate::error::{BoxError, Error, Result};
use crate::fault::{FaultAction, FaultHook, FaultPoint};
use crate::key::{idempotency_key, validate_op_key, Payload};
use crate::owner::new_owner;
use crate::protocol::{cancel_unsent, policy, Move, Settle};
use crate::record::{DbTime, Record, Snapshot, State};
use crate::spec::{EffectKind, JobSpec, StalePolicy};
use crate::store::{
    append, Claim, ClaimRow, Completion, OpAudit, OpClaim, OpCompleteBatch, OpHeartbeat, Store,
};

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

/// A done effect waiting for its completion write.
#[derive(Debug)]
pub struct DoneAttempt {
    ctx: EffectCtx,
    external_ref: Option<String>,
    result: serde_json::Value,
}

impl DoneAttempt {
    /// The operation key.
    pub fn op_key(&self) -> &str {
        &self.ctx.op_key
    }
}

/// A claim taken inside the caller's transaction (local effects).
#[derive(Debug)]
pub struct LocalClaim {
    claim: Claim,
    op_key: String,
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

/// What an existing row means for this delivery.
enum Decision {
    Settled(Outcome),
    Stale(Box<Record>),
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
        let claim = OpClaim {
            job_type: &self.spec.job_type,
            op_key,
            fingerprint: &payload.fingerprint,
            payload: payload.json.as_deref(),
            owner: &self.owner,
            lease: self.spec.lease,
        };
        let (claim, stale_before) = match self.store.op_claim(&claim).await? {
            ClaimRow::Claimed(c) => (c, false),
            ClaimRow::Existing(snap) => match self.decide(&snap, payload)? {
                Decision::Settled(outcome) => return Ok(outcome),
                Decision::Stale(record) => match self.take_over(&record).await? {
                    Some(c) => (c, true),
                    None => return self.settled_after_race(op_key, payload).await,
                },
            },
        };
        let ctx = self.ctx(op_key, &claim, payload);
        self.act(ctx, &claim, stale_before, effect).await
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
        let ctx = self.ctx(&record.op_key, claim, &payload);
        self.act(ctx, claim, false, effect).await
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
        let ctx = self.ctx(&record.op_key, claim, &payload);
        self.release_or_cancel(&ctx, reason, None, false).await
    }

    fn ctx(&self, op_key: &str, claim: &Claim, payload: &Payload) -> EffectCtx {
        EffectCtx {
            job_type: self.spec.job_type.clone(),
            op_key: op_key.to_owned(),
            idempotency_key: idempotency_key(&self.spec.job_type, op_key),
            token: claim.token,
            attempt: claim.attempts,
            payload: payload.value(),
            cancel_requested: Arc::default(),
        }
    }

    /// What an existing row means for a delivery carrying `payload`.
    fn decide(&self, snap: &Snapshot, payload: &Payload) -> Result<Decision> {
        let r = &snap.record;
        if r.fingerprint != payload.fingerprint {
            return Err(Error::PayloadMismatch {
                job_type: r.job_type.clone(),
                op_key: r.op_key.clone(),
                stored: r.fingerprint.clone(),
                offered: payload.fingerprint.clone(),
            });
        }
        let outcome = match r.state {
            State::Completed => Outcome::Done {
                result: r.result_value(),
                external_ref: r.external_ref.clone(),
                repeat: true,
            },
            State::Failed => Outcome::Failed {
                error: r.error.clone(),
            },
            State::Cancelled => Outcome::Cancelled {
                withdrawn_ref: None,
            },
            State::Held => Outcome::Held {
                reason: r.error.clone(),
            },
            State::Queued => Outcome::NotDue { due_at: r.due_at },
            State::Claimed if r.lease_expired(snap.now) => {
                return Ok(Decision::Stale(Box::new(r.clone())))
            }
            State::Claimed => {
                let claimed_at = r.claimed_at.unwrap_or(snap.now);
                Outcome::InProgress {
                    age: snap.now.since(claimed_at),
                    lease: r.lease_until.unwrap_or(snap.now).since(claimed_at),
                    owner: r.owner.clone(),
                }
            }
        };
        Ok(Decision::Settled(outcome))
    }

    /// Takes over a stale claim as the policy says. `Some` when this worker
    /// now holds a claim and must act; `None` when another worker moved the
    /// row first, or the policy settled it (held or failed).
    async fn take_over(&self, stale: &Record) -> Result<Option<Claim>> {
        let owner = stale.owner.as_deref().unwrap_or("?");
        let settle = policy(self.spec.effect, stale.attempts);
        let reason = match (settle, self.spec.effect) {
            (Settle::Hold, EffectKind::Opaque(StalePolicy::AtLeastOnce)) => {
                "a redo under at-least-once also went past its lease; held to keep to one extra"
                    .to_owned()
            }
            (Settle::Hold, _) => format!(
                "claim by {owner} went past its lease; the effect may or may not have happened"
            ),
            (Settle::Fail, _) => {
                "claim went past its lease; given up under at-most-once (the effect may be missing)"
                    .to_owned()
            }
            (Settle::Redo, _) => format!("took over a claim of {owner} past its lease"),
        };
        let to = settle.to();
        let p = settle.take_over(stale, &self.owner, self.spec.lease, &reason);
        let taken = self.store.op_take_over(&p).await?;
        info!(job = %stale.job_type, key = %stale.op_key, stale_token = stale.token, to = %to, won = taken.is_some(), "stale claim");
        if let Some(c) = &taken {
            let detail = format!("stale token {}: {reason}", stale.token);
            let states = [State::Claimed, to];
            let event = AuditKind::TakeOver;
            self.audit(&stale.op_key, event, c.token, states, &detail)
                .await;
        }
        Ok(taken.filter(|_| to == State::Claimed))
    }

    /// After a lost take-over race or a settled take-over: report the row as it stands.
    async fn settled_after_race(&self, op_key: &str, payload: &Payload) -> Result<Outcome> {
        let snap = self.get(op_key).await?;
        match self.decide(&snap, payload)? {
            Decision::Settled(outcome) => Ok(outcome),
            // Still stale: someone else is taking it over right now.
            Decision::Stale(r) => Ok(Outcome::InProgress {
                age: snap.now.since(r.claimed_at.unwrap_or(snap.now)),
                lease: self.spec.lease,
                owner: r.owner,
            }),
        }
    }

    /// Appends an event under this guard's owner, after the write that made it.
    async fn audit(
        &self,
        op_key: &str,
        event: AuditKind,
        token: i64,
        [from, to]: [State; 2],
        detail: &str,
    ) {
        let p = OpAudit {
            job_type: &self.spec.job_type,
            op_key,
            event,
            actor: &self.owner,
            token,
            from: Some(from),
            to: Some(to),
            detail: Some(detail),
            attempt: None,
            retry_after: None,
        };
        append(&self.store, &p).await;
    }

    async fn get(&self, op_key: &str) -> Result<Snapshot> {
        self.store
            .op_get(&self.spec.job_type, op_key)
            .await?
            .ok_or_else(|| Error::NotFound {
                job_type: self.spec.job_type.clone(),
                op_key: op_key.to_owned(),
            })
    }

    fn fault(&self, point: FaultPoint) -> Result<()> {
        match self.fault_hook.as_ref().map(|hook| hook(point)) {
            Some(FaultAction::Crash) => Err(Error::InjectedCrash(point)),
            _ => Ok(()),
        }
    }

    async fn lost_claim(&self, op_key: &str, token: i64) -> Error {
        match self.get(op_key).await {
            Ok(snap) => self.lost(token, snap.record).await,
            Err(e) => e,
        }
    }

    /// [`Error::LostClaim`] for the `token` this worker held, with the row as
    /// it now stands; appended to the audit trail. (A local claim lost inside
    /// its transaction is not: its transaction rolls back, and on SQLite the
    /// append would wait on the connection the transaction holds.)
    async fn lost(&self, token: i64, record: Record) -> Error {
        let detail = format!(
            "the row is now {} with token {} (owner {})",
            record.state,
            record.token,
            record.owner.as_deref().unwrap_or("-")
        );
        let states = [State::Claimed, record.state];
        self.audit(&record.op_key, AuditKind::LostClaim, token, states, &detail)
            .await;
        Error::LostClaim {
            token,
            record: Box::new(record),
        }
    }
}
