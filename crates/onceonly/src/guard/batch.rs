//! Batched completion: a relay acts on many claims, then completes the
//! done ones in one statement. Each delivery's machine stops at its
//! `move complete`; the batch statement answers each with its own
//! true or false, and each machine goes on from there.

use super::act::Delivery;
use super::*;
use crate::protocol::decide::Answer;
use crate::store::{Completion, OpCompleteBatch};

impl<S: Store> Guard<S> {
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
        let ctx = self.ctx(&record.op_key, Some(claim), &payload);
        let entry = Entry::RunClaimed {
            claim: claimed(claim),
        };
        let mut delivery = Delivery::new(Decider::new(self.job(), entry), ctx);
        match self
            .drive(&mut delivery, Answer::None, None, effect, true)
            .await
        {
            Ok(Step::Move(complete)) => Attempt::Done(DoneAttempt {
                delivery: Box::new(delivery),
                complete,
            }),
            Ok(end) => Attempt::Settled(self.ended(&mut delivery, end)),
            Err(e) => Attempt::Settled(Err(e)),
        }
    }

    /// Completes one done attempt, fenced by its token: the same move
    /// [`Guard::run_claimed`] makes after the effect, made later (a relay
    /// sends it alongside its next claim).
    pub async fn complete<E: Effect>(&self, done: DoneAttempt, effect: &E) -> Result<Outcome> {
        let DoneAttempt {
            mut delivery,
            complete,
        } = done;
        let p = complete.op(&self.spec.job_type, &delivery.ctx.op_key);
        let moved = self.store.op_move(&p).await?;
        self.completed(&mut delivery, moved, effect).await
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
        let items: Vec<Completion<'_>> = done
            .iter()
            .map(|d| Completion {
                op_key: &d.delivery.ctx.op_key,
                token: d.complete.token,
                external_ref: d.complete.external_ref.as_deref(),
                result: d.complete.result.as_deref().unwrap_or("null"),
            })
            .collect();
        let p = OpCompleteBatch {
            job_type: &self.spec.job_type,
            items: &items,
        };
        let completed = match self.store.op_complete_batch(&p).await {
            Ok(keys) => keys.into_iter().collect::<std::collections::HashSet<_>>(),
            // One statement failed every item: each gets the error, its
            // kind and cause kept.
            Err(e) => {
                return done
                    .into_iter()
                    .map(|d| (d.delivery.ctx.op_key, Err(e.shared())))
                    .collect()
            }
        };
        let mut outcomes = Vec::with_capacity(done.len());
        for DoneAttempt { mut delivery, .. } in done {
            let moved = completed.contains(&delivery.ctx.op_key);
            let outcome = self.completed(&mut delivery, moved, effect).await;
            outcomes.push((delivery.ctx.op_key, outcome));
        }
        outcomes
    }

    /// Goes on from the answer to a delivery's `move complete`.
    async fn completed<E: Effect>(
        &self,
        delivery: &mut Delivery,
        moved: bool,
        effect: &E,
    ) -> Result<Outcome> {
        let end = self
            .drive(delivery, Answer::Moved(moved), None, effect, false)
            .await?;
        self.ended(delivery, end)
    }
}
