//! Batched completion: a relay acts on many claims, then completes the
//! done ones in one statement.

use super::*;

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

    /// Completes one done attempt, fenced by its token: the same move
    /// [`Guard::run_claimed`] makes after the effect, made later (a relay
    /// sends it alongside its next claim).
    pub async fn complete<E: Effect>(&self, done: DoneAttempt, effect: &E) -> Result<Outcome> {
        let DoneAttempt {
            ctx,
            external_ref,
            result,
        } = done;
        self.record(
            &ctx,
            EffectOutcome::Done {
                external_ref,
                result,
            },
            effect,
        )
        .await
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
                // One statement failed every item: each gets the error (a
                // database error keeps its kind and cause).
                let each = |e: &Error| match e {
                    Error::Db(db) => Error::Db(db.clone()),
                    Error::Unreachable { url, reason } => Error::Unreachable {
                        url: url.clone(),
                        reason: reason.clone(),
                    },
                    other => Error::Database(other.to_string()),
                };
                return done
                    .into_iter()
                    .map(|d| (d.ctx.op_key, Err(each(&e))))
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
}
