//! The interpreter of the guard's step machine ([`crate::protocol::decide`]):
//! it runs each step against the store and the effect and gives the machine
//! the answer. Decisions and messages live in the machine; this file owns
//! only the I/O: the statements, the effect within the job timeout with its
//! heartbeats (a lost claim or an unrenewed lease answers the step in
//! flight), the sleeps between tries, the audit appends, the fault hook.

use std::sync::atomic::Ordering;

use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::*;
use crate::effect::{LookupOutcome, WithdrawOutcome};
use crate::fault::FaultAction;
use crate::protocol::decide::{
    Answer, AuditStep, ClaimAnswer, Claimed, Done, EffectAnswer, FaultAnswer, LookupAnswer,
    SleepAnswer, StoredRow, WithdrawAnswer,
};
use crate::protocol::Move;
use crate::store::append;
use crate::store::{ClaimRow, OpAudit, OpClaim, OpHeartbeat};

/// One delivery between the machine's steps: the machine, the effect's
/// context (the claim held), the row the last statement returned, and,
/// while the effect is tried, the job timeout's deadline and the heartbeat.
#[derive(Debug)]
pub(super) struct Delivery {
    pub(super) decider: Decider,
    pub(super) ctx: EffectCtx,
    pub(super) read: Option<Record>,
    tries: Option<Tries>,
}

/// The job timeout and the heartbeat, from the effect's first try.
#[derive(Debug)]
struct Tries {
    deadline: Instant,
    beat: Option<Beat>,
}

#[derive(Debug)]
struct Beat {
    interval: Duration,
    next: Instant,
    renewed: Instant,
}

/// How a step run while the effect is tried ended.
enum Flight<T> {
    Done(T),
    /// Done, but when the job timeout had run out: a failure it reports
    /// (a request cut at the same moment) is the timeout's.
    Late(T),
    TimedOut,
    ClaimLost,
    Unrenewed(String),
}

impl Delivery {
    pub(super) fn new(decider: Decider, ctx: EffectCtx) -> Self {
        Delivery {
            decider,
            ctx,
            read: None,
            tries: None,
        }
    }

    fn hold(&mut self, claim: &Claim) {
        self.ctx.token = claim.token;
        self.ctx.attempt = claim.attempts;
    }
}

impl<S: Store> Guard<S> {
    /// Runs the machine's steps from `answer` until it ends, or, with
    /// `until_complete`, until it asks for the `complete` move (a batch
    /// runs that one for many deliveries at once). Returns that step.
    pub(super) async fn drive<E: Effect>(
        &self,
        delivery: &mut Delivery,
        mut answer: Answer,
        payload: Option<&Payload>,
        effect: &E,
        until_complete: bool,
    ) -> Result<Step> {
        loop {
            let step = delivery.decider.next(answer);
            let complete = matches!(&step, Step::Move(m) if m.to == Move::Complete);
            if step.is_end() || until_complete && complete {
                return Ok(step);
            }
            answer = self.answer(delivery, &step, payload, effect).await?;
        }
    }

    /// Takes one step; its answer for the machine.
    async fn answer<E: Effect>(
        &self,
        delivery: &mut Delivery,
        step: &Step,
        payload: Option<&Payload>,
        effect: &E,
    ) -> Result<Answer> {
        let job = self.spec.job_type.as_str();
        Ok(match step {
            Step::Claim => {
                let payload = payload.ok_or_else(|| no_step("claim"))?;
                let p = OpClaim {
                    job_type: job,
                    op_key: &delivery.ctx.op_key,
                    fingerprint: &payload.fingerprint,
                    payload: payload.json.as_deref(),
                    owner: &self.owner,
                    lease: self.spec.lease,
                };
                match self.store.op_claim(&p).await? {
                    ClaimRow::Claimed(c) => {
                        delivery.hold(&c);
                        Answer::Claim(ClaimAnswer::Claimed(claimed(&c)))
                    }
                    ClaimRow::Existing(snap) => {
                        let row = StoredRow::from(&*snap);
                        delivery.read = Some(snap.record);
                        Answer::Claim(ClaimAnswer::Existing(row))
                    }
                }
            }
            Step::TakeOver { settle, reason, .. } => {
                let stale = delivery.read.as_ref().ok_or_else(|| no_step("take_over"))?;
                let p = settle.take_over(stale, &self.owner, self.spec.lease, reason);
                let taken = self.store.op_take_over(&p).await?;
                info!(job = %job, key = %stale.op_key, stale_token = stale.token, to = %settle.to(), won = taken.is_some(), "stale claim");
                if let Some(c) = &taken {
                    delivery.hold(c);
                }
                Answer::TakeOver(taken.as_ref().map(claimed))
            }
            Step::Read => {
                let snap = self.store.op_get(job, &delivery.ctx.op_key).await?;
                let row = snap.as_ref().map(StoredRow::from);
                delivery.read = snap.map(|s| s.record);
                Answer::Read(row)
            }
            Step::Move(m) => {
                Answer::Moved(self.store.op_move(&m.op(job, &delivery.ctx.op_key)).await?)
            }
            Step::Audit(a) => {
                self.audit(&delivery.ctx.op_key, a).await;
                Answer::None
            }
            Step::Fault { point } => {
                let answer = self.fault(*point);
                if *point == FaultPoint::AfterClaim {
                    delivery.tries = Some(self.tries());
                }
                Answer::Fault(answer)
            }
            Step::CancelRequested => Answer::CancelRequested(delivery.ctx.cancel_requested()),
            Step::Perform { .. } => {
                let Delivery { ctx, tries, .. } = delivery;
                Answer::Perform(
                    match self.in_flight(ctx, tries, effect.perform(ctx)).await {
                        Flight::Done(EffectOutcome::Done {
                            external_ref,
                            result,
                        })
                        | Flight::Late(EffectOutcome::Done {
                            external_ref,
                            result,
                        }) => EffectAnswer::Done(Done {
                            external_ref,
                            result,
                            unstored: None,
                        }),
                        Flight::Done(EffectOutcome::NotSent(why)) => EffectAnswer::NotSent(why),
                        Flight::Done(EffectOutcome::Unknown(why)) => EffectAnswer::Unknown(why),
                        Flight::Done(EffectOutcome::Failed(why)) => EffectAnswer::Failed(why),
                        // A failure reported when the job timeout had run
                        // out (a request cut at that moment) is the timeout's.
                        Flight::TimedOut | Flight::Late(_) => EffectAnswer::TimedOut,
                        Flight::ClaimLost => EffectAnswer::ClaimLost,
                        Flight::Unrenewed(e) => EffectAnswer::LeaseUnrenewed(e),
                    },
                )
            }
            Step::Lookup => {
                let Delivery { ctx, tries, .. } = delivery;
                Answer::Lookup(match self.in_flight(ctx, tries, effect.lookup(ctx)).await {
                    Flight::Done(LookupOutcome::Found {
                        external_ref,
                        result,
                    })
                    | Flight::Late(LookupOutcome::Found {
                        external_ref,
                        result,
                    }) => LookupAnswer::Found {
                        external_ref,
                        result,
                    },
                    Flight::Done(LookupOutcome::NotFound) => LookupAnswer::NotFound,
                    Flight::Done(LookupOutcome::Unavailable(why)) => LookupAnswer::Unavailable(why),
                    Flight::TimedOut | Flight::Late(_) => LookupAnswer::TimedOut,
                    Flight::ClaimLost => LookupAnswer::ClaimLost,
                    Flight::Unrenewed(e) => LookupAnswer::LeaseUnrenewed(e),
                })
            }
            Step::Sleep { ms } => {
                debug!(job = %job, key = %delivery.ctx.op_key, "retrying under the claim");
                let Delivery { ctx, tries, .. } = delivery;
                let nap = tokio::time::sleep(Duration::from_millis(*ms));
                Answer::Sleep(match self.in_flight(ctx, tries, nap).await {
                    Flight::Done(()) => SleepAnswer::Slept,
                    Flight::TimedOut | Flight::Late(()) => SleepAnswer::TimedOut,
                    Flight::ClaimLost => SleepAnswer::ClaimLost,
                    Flight::Unrenewed(e) => SleepAnswer::LeaseUnrenewed(e),
                })
            }
            Step::Withdraw { external_ref } => {
                warn!(job = %job, key = %delivery.ctx.op_key, %external_ref, "cancel requested while the effect ran; withdrawing");
                Answer::Withdraw(match effect.withdraw(&delivery.ctx, external_ref).await {
                    WithdrawOutcome::Withdrawn => WithdrawAnswer::Withdrawn,
                    WithdrawOutcome::NotWithdrawn(why) => WithdrawAnswer::NotWithdrawn(why),
                })
            }
            Step::Finish { .. } | Step::Error { .. } => return Err(no_step("end")),
        })
    }

    /// What the fault hook says at `point`.
    pub(super) fn fault(&self, point: FaultPoint) -> FaultAnswer {
        match self.fault_hook.as_ref().map(|hook| hook(point)) {
            Some(FaultAction::Crash) => FaultAnswer::Crash,
            _ => FaultAnswer::Continue,
        }
    }

    /// The job timeout and heartbeat of the tries starting now.
    fn tries(&self) -> Tries {
        let now = Instant::now();
        Tries {
            deadline: now + self.spec.timeout,
            beat: self.spec.heartbeat.map(|interval| Beat {
                interval,
                next: now + interval,
                renewed: now,
            }),
        }
    }

    /// Runs `work` within the job timeout, renewing the lease every
    /// heartbeat interval; stops it (drops it) when the timeout runs out,
    /// the claim turns out lost, or the lease cannot be renewed in time.
    async fn in_flight<T>(
        &self,
        ctx: &EffectCtx,
        tries: &mut Option<Tries>,
        work: impl Future<Output = T>,
    ) -> Flight<T> {
        let Some(tries) = tries.as_mut() else {
            return Flight::Done(work.await);
        };
        let deadline = tries.deadline;
        let beat = async {
            match tries.beat.as_mut() {
                Some(beat) => self.beat(beat, ctx).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            done = work => match Instant::now() < deadline {
                true => Flight::Done(done),
                false => Flight::Late(done),
            },
            trouble = beat => trouble,
            () = tokio::time::sleep_until(deadline) => Flight::TimedOut,
        }
    }

    /// Heartbeats until one finds the claim gone or the lease can no longer
    /// be renewed before it runs out; carries the cancel request to `ctx`.
    async fn beat<T>(&self, beat: &mut Beat, ctx: &EffectCtx) -> Flight<T> {
        loop {
            tokio::time::sleep_until(beat.next).await;
            beat.next = Instant::now() + beat.interval;
            let p = OpHeartbeat {
                job_type: &ctx.job_type,
                op_key: &ctx.op_key,
                token: ctx.token,
                lease: self.spec.lease,
            };
            match self.store.op_heartbeat(&p).await {
                Ok(Some(hb)) => {
                    beat.renewed = Instant::now();
                    ctx.cancel_requested
                        .store(hb.cancel_requested, Ordering::SeqCst)
                }
                Ok(None) => return Flight::ClaimLost,
                Err(e) if beat.renewed.elapsed() + beat.interval >= self.spec.lease => {
                    warn!(job = %ctx.job_type, key = %ctx.op_key, error = %e, "lease not renewed; stopping the effect");
                    return Flight::Unrenewed(e.to_string());
                }
                Err(e) => {
                    warn!(job = %ctx.job_type, key = %ctx.op_key, error = %e, "heartbeat failed; will retry")
                }
            }
            beat.next = Instant::now() + beat.interval;
        }
    }

    /// Appends an event under this guard's owner, after the write that made it.
    async fn audit(&self, op_key: &str, a: &AuditStep) {
        let p = OpAudit {
            job_type: &self.spec.job_type,
            op_key,
            event: a.event,
            actor: &self.owner,
            token: a.token,
            from: Some(a.from),
            to: Some(a.to),
            detail: Some(&a.detail),
            attempt: a.attempt,
            retry_after: a.retry_after_ms.map(Duration::from_millis),
        };
        append(&self.store, &p).await;
    }
}

/// The machine's view of a claim.
pub(super) fn claimed(claim: &Claim) -> Claimed {
    Claimed {
        token: claim.token,
        attempts: claim.attempts,
    }
}

/// A step the interpreter cannot take where the machine asked for it (a
/// bug in the machine or its interpreter).
fn no_step(what: &str) -> Error {
    Error::db_other(format!(
        "the guard's machine asked for a {what} step where none can run"
    ))
}
