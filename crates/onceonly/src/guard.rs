//! The guard: claim, act, then complete, release or fail, each write fenced.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tracing::{debug, info, warn};

use crate::audit::{append, AuditKind};
use crate::effect::{Effect, EffectCtx, EffectOutcome, LookupOutcome, WithdrawOutcome};
use crate::error::{Error, Result};
use crate::fault::{FaultAction, FaultHook, FaultPoint};
use crate::key::{idempotency_key, validate_op_key, Payload};
use crate::owner::new_owner;
use crate::record::{DbTime, Record, Snapshot, State};
use crate::spec::{EffectKind, JobSpec, StalePolicy};
use crate::store::{
    Claim, ClaimRow, Completion, OpAudit, OpClaim, OpCompleteBatch, OpHeartbeat, OpMove,
    OpTakeOver, Store,
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

/// A boxed error from a local effect.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

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

    /// Claims a local operation inside the caller's transaction.
    ///
    /// The claim commits or rolls back with the caller's own writes, so the
    /// effect exists exactly once: call [`Guard::complete_in`] on the same
    /// connection, then commit.
    pub async fn claim_in(
        &self,
        conn: &mut S::Conn,
        op_key: &str,
        payload: &Payload,
    ) -> Result<LocalStart> {
        validate_op_key(op_key)?;
        let p = OpClaim {
            job_type: &self.spec.job_type,
            op_key,
            fingerprint: &payload.fingerprint,
            payload: payload.json.as_deref(),
            owner: &self.owner,
            lease: self.spec.lease,
        };
        match self.store.op_claim_in(conn, &p).await? {
            ClaimRow::Claimed(claim) => Ok(LocalStart::Claimed(LocalClaim {
                ctx: self.ctx(op_key, &claim, payload),
                op_key: op_key.to_owned(),
                claim,
            })),
            ClaimRow::Existing(snap) => match self.decide(&snap, payload)? {
                Decision::Settled(outcome) => Ok(LocalStart::Settled(outcome)),
                // A local claim only outlives its transaction if someone mixed
                // effect kinds on one job type; a person must look.
                Decision::Stale(record) => Ok(LocalStart::Settled(Outcome::InProgress {
                    age: snap.now.since(record.claimed_at.unwrap_or(snap.now)),
                    lease: self.spec.lease,
                    owner: record.owner,
                })),
            },
        }
    }

    /// Completes a local claim inside the caller's transaction.
    pub async fn complete_in(
        &self,
        conn: &mut S::Conn,
        claim: &LocalClaim,
        result: &serde_json::Value,
    ) -> Result<Outcome> {
        self.fault(FaultPoint::AfterEffect)?;
        let result_text = result.to_string();
        let mut p = OpMove::new(
            &self.spec.job_type,
            &claim.op_key,
            claim.claim.token,
            State::Claimed,
            State::Completed,
        );
        p.result = Some(&result_text);
        if self.store.op_move_in(conn, &p).await? {
            Ok(Outcome::Done {
                result: result.clone(),
                external_ref: None,
                repeat: false,
            })
        } else {
            Err(self
                .lost_claim_in(conn, &claim.op_key, claim.claim.token)
                .await)
        }
    }

    /// Runs a local effect: claim, `effect` and completion in one transaction
    /// of the store's pool. The effect gets the transaction's connection for
    /// its own writes; if it returns an error, everything rolls back and
    /// nothing is recorded.
    pub async fn run_local<F>(&self, op_key: &str, payload: &Payload, effect: F) -> Result<Outcome>
    where
        F: for<'c> FnOnce(
            &'c mut S::Conn,
            &'c EffectCtx,
        ) -> Pin<
            Box<dyn Future<Output = Result<serde_json::Value, BoxError>> + Send + 'c>,
        >,
    {
        let mut tx = self.store.begin().await?;
        let claim = match self.claim_in(&mut tx, op_key, payload).await? {
            LocalStart::Claimed(claim) => claim,
            LocalStart::Settled(outcome) => return Ok(outcome),
        };
        self.fault(FaultPoint::AfterClaim)?;
        let result =
            match tokio::time::timeout(self.spec.timeout, effect(&mut tx, &claim.ctx)).await {
                Ok(Ok(result)) => result,
                Ok(Err(e)) => {
                    return Err(Error::Invalid(format!(
                        "local effect of {}:{op_key} failed, its transaction rolled back: {e}",
                        self.spec.job_type
                    )))
                }
                Err(_) => return Err(Error::Timeout(self.spec.timeout)),
            };
        let outcome = self.complete_in(&mut tx, &claim, &result).await?;
        S::commit(tx).await?;
        Ok(outcome)
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
        let (to, reason) = match self.spec.effect {
            EffectKind::Opaque(StalePolicy::Hold) => (
                State::Held,
                format!(
                    "claim by {} went past its lease; the effect may or may not have happened",
                    stale.owner.as_deref().unwrap_or("?")
                ),
            ),
            EffectKind::Opaque(StalePolicy::AtMostOnce) => (
                State::Failed,
                "claim went past its lease; given up under at-most-once (the effect may be missing)"
                    .to_owned(),
            ),
            // At most one extra: a second stale claim is held, not redone again.
            EffectKind::Opaque(StalePolicy::AtLeastOnce) if stale.attempts >= 2 => (
                State::Held,
                "a redo under at-least-once also went past its lease; held to keep to one extra"
                    .to_owned(),
            ),
            _ => (
                State::Claimed,
                format!("took over a claim of {} past its lease", stale.owner.as_deref().unwrap_or("?")),
            ),
        };
        let p = OpTakeOver {
            job_type: &stale.job_type,
            op_key: &stale.op_key,
            stale_token: stale.token,
            to,
            owner: &self.owner,
            lease: self.spec.lease,
            reason: &reason,
        };
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

    /// Acts under a claim this worker holds, within the job timeout, renewing
    /// the lease when a heartbeat is set.
    async fn act<E: Effect>(
        &self,
        ctx: EffectCtx,
        claim: &Claim,
        after_stale: bool,
        effect: &E,
    ) -> Result<Outcome> {
        let outcome = self.perform(&ctx, claim, after_stale, effect).await?;
        self.record(&ctx, outcome, effect).await
    }

    /// The effect under the claim, bounded by the job timeout (a timed-out
    /// effect is dropped: stopped, its outcome unknown).
    async fn perform<E: Effect>(
        &self,
        ctx: &EffectCtx,
        claim: &Claim,
        after_stale: bool,
        effect: &E,
    ) -> Result<EffectOutcome> {
        self.fault(FaultPoint::AfterClaim)?;
        let attempts = self.attempts(ctx, claim, after_stale, effect);
        let bounded = tokio::time::timeout(self.spec.timeout, self.with_heartbeat(ctx, attempts));
        Ok(match bounded.await {
            Ok(result) => result?,
            Err(_) => EffectOutcome::Unknown(format!(
                "timed out after {}; the effect was stopped",
                humantime::format_duration(self.spec.timeout)
            )),
        })
    }

    /// Like [`Guard::run_claimed`], but a done effect is returned unrecorded,
    /// so a relay can complete many in one statement with
    /// [`Guard::complete_batch`]. Any other outcome is recorded here.
    pub async fn attempt_claimed<E: Effect>(
        &self,
        record: &Record,
        claim: &Claim,
        effect: &E,
    ) -> Attempt {
        let payload = Payload::stored(record);
        let ctx = self.ctx(&record.op_key, claim, &payload);
        match self.perform(&ctx, claim, false, effect).await {
            Ok(EffectOutcome::Done {
                external_ref,
                result,
            }) => Attempt::Done(DoneAttempt {
                ctx,
                external_ref,
                result,
            }),
            Ok(other) => Attempt::Settled(self.record(&ctx, other, effect).await),
            Err(e) => Attempt::Settled(Err(e)),
        }
    }

    /// Completes done attempts in one statement, each fenced by its own
    /// token. An attempt the statement did not complete is settled alone:
    /// withdrawn when an operator asked to cancel meanwhile, otherwise
    /// reported as [`Error::LostClaim`].
    pub async fn complete_batch<E: Effect>(
        &self,
        done: Vec<DoneAttempt>,
        effect: &E,
    ) -> Vec<(String, Result<Outcome>)> {
        if done.is_empty() {
            return Vec::new();
        }
        let results: Vec<String> = done.iter().map(|d| d.result.to_string()).collect();
        let items: Vec<Completion<'_>> = done
            .iter()
            .zip(&results)
            .map(|(d, result)| Completion {
                op_key: &d.ctx.op_key,
                token: d.ctx.token,
                external_ref: d.external_ref.as_deref(),
                result,
            })
            .collect();
        let p = OpCompleteBatch {
            job_type: &self.spec.job_type,
            items: &items,
        };
        let completed = match self.store.op_complete_batch(&p).await {
            Ok(keys) => keys.into_iter().collect::<std::collections::HashSet<_>>(),
            Err(e) => {
                let why = e.to_string();
                return done
                    .into_iter()
                    .map(|d| (d.ctx.op_key, Err(Error::Database(why.clone()))))
                    .collect();
            }
        };
        let mut outcomes = Vec::with_capacity(done.len());
        for (d, result_text) in done.into_iter().zip(results) {
            let outcome = if completed.contains(&d.ctx.op_key) {
                Ok(Outcome::Done {
                    result: d.result,
                    external_ref: d.external_ref,
                    repeat: false,
                })
            } else {
                self.completion_refused(&d.ctx, d.external_ref, &result_text, effect)
                    .await
            };
            outcomes.push((d.ctx.op_key, outcome));
        }
        outcomes
    }

    /// Runs `work` while renewing the lease every heartbeat interval; stops
    /// the work (drops it) when the claim turns out lost.
    async fn with_heartbeat(
        &self,
        ctx: &EffectCtx,
        work: impl Future<Output = Result<EffectOutcome>>,
    ) -> Result<EffectOutcome> {
        let Some(interval) = self.spec.heartbeat else {
            return work.await;
        };
        let beat = async {
            loop {
                tokio::time::sleep(interval).await;
                let p = OpHeartbeat {
                    job_type: &ctx.job_type,
                    op_key: &ctx.op_key,
                    token: ctx.token,
                    lease: self.spec.lease,
                };
                match self.store.op_heartbeat(&p).await {
                    Ok(Some(hb)) => ctx
                        .cancel_requested
                        .store(hb.cancel_requested, Ordering::SeqCst),
                    Ok(None) => return self.lost_claim(&ctx.op_key, ctx.token).await,
                    Err(e) => {
                        warn!(job = %ctx.job_type, key = %ctx.op_key, error = %e, "heartbeat failed; will retry")
                    }
                }
            }
        };
        tokio::select! {
            outcome = work => outcome,
            lost = beat => Err(lost),
        }
    }

    /// The effect, retried under the claim where the kind allows it.
    async fn attempts<E: Effect>(
        &self,
        ctx: &EffectCtx,
        claim: &Claim,
        after_stale: bool,
        effect: &E,
    ) -> Result<EffectOutcome> {
        // A lookup effect looks first whenever an earlier claim may have acted.
        let mut look_first =
            self.spec.effect == EffectKind::Lookup && (after_stale || claim.attempts > 1);
        let mut retries_left = self.spec.max_retries;
        let mut backoff = Duration::from_millis(20);
        loop {
            if look_first {
                match effect.lookup(ctx).await {
                    LookupOutcome::Found {
                        external_ref,
                        result,
                    } => {
                        return Ok(EffectOutcome::Done {
                            external_ref,
                            result,
                        })
                    }
                    LookupOutcome::NotFound => {}
                    LookupOutcome::Unavailable(why) => {
                        return Ok(EffectOutcome::NotSent(format!("lookup unavailable: {why}")))
                    }
                }
            }
            if ctx.cancel_requested() {
                return Ok(EffectOutcome::Failed(
                    "cancel requested before the effect".into(),
                ));
            }
            let outcome = effect.perform(ctx).await;
            let retry = matches!(
                (&outcome, self.spec.effect),
                (EffectOutcome::NotSent(_), _)
                    | (
                        EffectOutcome::Unknown(_),
                        EffectKind::Keyed | EffectKind::Lookup
                    )
            );
            if !retry || retries_left == 0 {
                if matches!(outcome, EffectOutcome::Done { .. }) {
                    self.fault(FaultPoint::AfterEffect)?;
                }
                return Ok(outcome);
            }
            debug!(job = %ctx.job_type, key = %ctx.op_key, ?outcome, "retrying under the claim");
            retries_left -= 1;
            look_first = self.spec.effect == EffectKind::Lookup;
            tokio::time::sleep(backoff).await;
            backoff *= 2;
        }
    }

    /// Writes what the effect reported, under the claim's token.
    async fn record<E: Effect>(
        &self,
        ctx: &EffectCtx,
        outcome: EffectOutcome,
        effect: &E,
    ) -> Result<Outcome> {
        let job = ctx.job_type.as_str();
        let key = ctx.op_key.as_str();
        match outcome {
            EffectOutcome::Done {
                external_ref,
                result,
            } => {
                let result_text = result.to_string();
                let mut p = OpMove::new(job, key, ctx.token, State::Claimed, State::Completed);
                p.unless_cancel_requested = true;
                p.external_ref = external_ref.as_deref();
                p.result = Some(&result_text);
                if self.store.op_move(&p).await? {
                    return Ok(Outcome::Done {
                        result,
                        external_ref,
                        repeat: false,
                    });
                }
                self.completion_refused(ctx, external_ref, &result_text, effect)
                    .await
            }
            EffectOutcome::NotSent(reason) => {
                if self.release(ctx, &reason).await? {
                    return Ok(Outcome::RetryLater { reason });
                }
                // An operator asked to cancel, and nothing was sent: stop here.
                let note = format!("cancel requested; the effect was not sent ({reason})");
                self.fenced(ctx, State::Cancelled, &note).await?;
                Ok(Outcome::Cancelled {
                    withdrawn_ref: None,
                })
            }
            EffectOutcome::Failed(error) => {
                let to = if ctx.cancel_requested() {
                    State::Cancelled
                } else {
                    State::Failed
                };
                self.fenced(ctx, to, &error).await?;
                Ok(if to == State::Cancelled {
                    Outcome::Cancelled {
                        withdrawn_ref: None,
                    }
                } else {
                    Outcome::Failed { error: Some(error) }
                })
            }
            EffectOutcome::Unknown(reason) => self.unknown(ctx, reason).await,
        }
    }

    /// An unknown outcome that retries under the claim did not clear.
    async fn unknown(&self, ctx: &EffectCtx, reason: String) -> Result<Outcome> {
        let (to, outcome) = match self.spec.effect {
            EffectKind::Opaque(StalePolicy::Hold) => (
                State::Held,
                Outcome::Held {
                    reason: Some(reason.clone()),
                },
            ),
            EffectKind::Opaque(StalePolicy::AtMostOnce) => (
                State::Failed,
                Outcome::Failed {
                    error: Some(reason.clone()),
                },
            ),
            EffectKind::Opaque(StalePolicy::AtLeastOnce) if ctx.attempt >= 2 => (
                State::Held,
                Outcome::Held {
                    reason: Some(reason.clone()),
                },
            ),
            // Keyed and lookup redo safely; at-least-once may redo once.
            _ => (
                State::Queued,
                Outcome::RetryLater {
                    reason: reason.clone(),
                },
            ),
        };
        if to != State::Queued {
            self.fenced(ctx, to, &reason).await?;
            return Ok(outcome);
        }
        if self.release(ctx, &reason).await? {
            return Ok(outcome);
        }
        // An operator asked to cancel, but the effect may exist and there is
        // no reference to withdraw: a person must look, the request kept.
        let note = format!(
            "cancel requested, but the effect's outcome is unknown ({reason}); check the destination"
        );
        self.fenced(ctx, State::Held, &note).await?;
        Ok(Outcome::Held { reason: Some(note) })
    }

    /// Releases our claim to queued unless an operator asked to cancel it.
    ///
    /// `Ok(true)`: released. `Ok(false)`: a cancel is pending and the claim
    /// is still ours (releasing would drop the request and let the next
    /// delivery act). [`Error::LostClaim`] when the claim is gone.
    async fn release(&self, ctx: &EffectCtx, reason: &str) -> Result<bool> {
        let mut p = OpMove::new(
            &ctx.job_type,
            &ctx.op_key,
            ctx.token,
            State::Claimed,
            State::Queued,
        );
        p.unless_cancel_requested = true;
        p.error = Some(reason);
        p.retry_after = Some(retry_backoff(ctx.attempt));
        if self.store.op_move(&p).await? {
            return Ok(true);
        }
        let snap = self.get(&ctx.op_key).await?;
        let r = snap.record;
        if r.state == State::Claimed && r.token == ctx.token && r.cancel_requested {
            Ok(false)
        } else {
            Err(self.lost(ctx.token, r).await)
        }
    }

    /// Moves our claim to `to`, or reports it lost.
    async fn fenced(&self, ctx: &EffectCtx, to: State, reason: &str) -> Result<()> {
        let mut p = OpMove::new(&ctx.job_type, &ctx.op_key, ctx.token, State::Claimed, to);
        p.error = Some(reason);
        if self.store.op_move(&p).await? {
            let event = match to {
                State::Held => AuditKind::Hold,
                State::Cancelled => AuditKind::Cancelled,
                _ => AuditKind::Failed,
            };
            self.audit(&ctx.op_key, event, ctx.token, [State::Claimed, to], reason)
                .await;
            Ok(())
        } else {
            Err(self.lost_claim(&ctx.op_key, ctx.token).await)
        }
    }

    /// The completion changed nothing: either an operator asked to cancel
    /// while the effect ran (withdraw it), or the claim is gone.
    async fn completion_refused<E: Effect>(
        &self,
        ctx: &EffectCtx,
        external_ref: Option<String>,
        result_text: &str,
        effect: &E,
    ) -> Result<Outcome> {
        let snap = self.get(&ctx.op_key).await?;
        let r = &snap.record;
        if !(r.state == State::Claimed && r.token == ctx.token && r.cancel_requested) {
            return Err(self.lost(ctx.token, snap.record).await);
        }
        let withdrawn = match external_ref.as_deref() {
            Some(ext) => effect.withdraw(ctx, ext).await,
            None => {
                WithdrawOutcome::NotWithdrawn("the effect returned no reference to withdraw".into())
            }
        };
        let mut p = OpMove::new(
            &ctx.job_type,
            &ctx.op_key,
            ctx.token,
            State::Claimed,
            State::Cancelled,
        );
        p.external_ref = external_ref.as_deref();
        p.result = Some(result_text);
        let (outcome, note, event) = match withdrawn {
            WithdrawOutcome::Withdrawn => (
                Outcome::Cancelled {
                    withdrawn_ref: external_ref.clone(),
                },
                "cancel requested while the effect ran; withdrawn at the destination".to_owned(),
                AuditKind::Compensated,
            ),
            WithdrawOutcome::NotWithdrawn(error) => {
                p.to = State::Completed;
                let note = format!(
                    "cancel requested while the effect ran, but the withdraw failed ({error}); the item is live at the destination"
                );
                (
                    Outcome::WithdrawFailed {
                        external_ref: external_ref.clone(),
                        error,
                    },
                    note,
                    AuditKind::WithdrawFailed,
                )
            }
        };
        p.error = Some(&note);
        warn!(job = %ctx.job_type, key = %ctx.op_key, %note, "compensation");
        if self.store.op_move(&p).await? {
            self.audit(&ctx.op_key, event, ctx.token, [State::Claimed, p.to], &note)
                .await;
            Ok(outcome)
        } else {
            Err(self.lost_claim(&ctx.op_key, ctx.token).await)
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

    async fn lost_claim_in(&self, conn: &mut S::Conn, op_key: &str, token: i64) -> Error {
        match self
            .store
            .op_get_in(conn, &self.spec.job_type, op_key)
            .await
        {
            Ok(Some(snap)) => Error::LostClaim {
                token,
                record: Box::new(snap.record),
            },
            Ok(None) => Error::NotFound {
                job_type: self.spec.job_type.clone(),
                op_key: op_key.to_owned(),
            },
            Err(e) => e,
        }
    }
}

/// How long a released operation waits before it is due again: 500ms after
/// the first claim, doubling per claim, at most a minute, so a destination
/// that is down is not hammered by the relay.
fn retry_backoff(attempt: i64) -> Duration {
    let doublings = u32::try_from(attempt.saturating_sub(1).clamp(0, 7)).unwrap_or(7);
    (Duration::from_millis(500) * 2u32.pow(doublings)).min(Duration::from_secs(60))
}
