//! Local effects: claim and completion inside the caller's transaction,
//! the machine's `local` entry run on the transaction's connection.

use super::*;
use crate::protocol::decide::{Answer, ClaimAnswer, Done, EffectAnswer, StoredRow};
use crate::store::{ClaimRow, OpClaim};

impl<S: Store> Guard<S> {
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
        let entry = Entry::Local {
            fingerprint: payload.fingerprint.clone(),
        };
        let mut decider = Decider::new(self.job(), entry);
        let mut ctx = self.ctx(op_key, None, payload);
        let step = decider.next(Answer::None);
        debug_assert_eq!(step, Step::Claim);
        let p = OpClaim {
            job_type: &self.spec.job_type,
            op_key,
            fingerprint: &payload.fingerprint,
            payload: payload.json.as_deref(),
            owner: &self.owner,
            lease: self.spec.lease,
        };
        let answer = match self.store.op_claim_in(conn, &p).await? {
            ClaimRow::Claimed(claim) => {
                ctx.token = claim.token;
                ctx.attempt = claim.attempts;
                ClaimAnswer::Claimed(claimed(&claim))
            }
            ClaimRow::Existing(snap) => ClaimAnswer::Existing(StoredRow::from(&*snap)),
        };
        match decider.next(Answer::Claim(answer)) {
            // The claim is ours: the machine waits at the fault point after it.
            Step::Fault { .. } => Ok(LocalStart::Claimed(LocalClaim { decider, ctx })),
            Step::Finish { outcome } => Ok(LocalStart::Settled(outcome_of(outcome))),
            Step::Error { error } => Err(self.error_of(op_key, error, None, None)),
            other => Err(unexpected(&other)),
        }
    }

    /// Completes a local claim inside the caller's transaction.
    pub async fn complete_in(
        &self,
        conn: &mut S::Conn,
        claim: &LocalClaim,
        result: &serde_json::Value,
    ) -> Result<Outcome> {
        let mut decider = claim.decider.clone();
        // A caller of claim_in and complete_in has no fault point after the claim.
        let step = decider.next(Answer::Fault(decide::FaultAnswer::Continue));
        debug_assert!(matches!(step, Step::Perform { .. }));
        let done = EffectAnswer::Done(Done {
            external_ref: None,
            result: result.clone(),
            unstored: None,
        });
        self.finish_local(conn, &mut decider, &claim.ctx, Answer::Perform(done), None)
            .await
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
        let mut decider = claim.decider;
        let ctx = claim.ctx;
        match decider.next(Answer::Fault(self.fault(FaultPoint::AfterClaim))) {
            Step::Perform { .. } => {}
            Step::Error { error } => return Err(self.error_of(op_key, error, None, None)),
            other => return Err(unexpected(&other)),
        }
        let (answer, source) =
            match tokio::time::timeout(self.spec.timeout, effect(&mut tx, &ctx)).await {
                Ok(Ok(result)) => (
                    EffectAnswer::Done(Done {
                        external_ref: None,
                        result,
                        unstored: None,
                    }),
                    None,
                ),
                Ok(Err(source)) => (EffectAnswer::Raised(source.to_string()), Some(source)),
                Err(_) => (EffectAnswer::TimedOut, None),
            };
        let outcome = self
            .finish_local(&mut tx, &mut decider, &ctx, Answer::Perform(answer), source)
            .await?;
        S::commit(tx).await?;
        Ok(outcome)
    }

    /// Runs the machine's steps after the local effect, on `conn`: the
    /// fault point, the completion, and a read when it was refused (no
    /// audit append: the transaction rolls back).
    async fn finish_local(
        &self,
        conn: &mut S::Conn,
        decider: &mut Decider,
        ctx: &EffectCtx,
        mut answer: Answer,
        mut source: Option<BoxError>,
    ) -> Result<Outcome> {
        let mut read = None;
        loop {
            answer = match decider.next(answer) {
                Step::Fault { point } => Answer::Fault(self.fault(point)),
                Step::Move(m) => {
                    let p = m.op(&self.spec.job_type, &ctx.op_key);
                    Answer::Moved(self.store.op_move_in(conn, &p).await?)
                }
                Step::Read => {
                    let snap = self
                        .store
                        .op_get_in(conn, &self.spec.job_type, &ctx.op_key)
                        .await?;
                    let row = snap.as_ref().map(StoredRow::from);
                    read = snap.map(|s| s.record);
                    Answer::Read(row)
                }
                Step::Finish { outcome } => return Ok(outcome_of(outcome)),
                Step::Error { error } => {
                    return Err(self.error_of(&ctx.op_key, error, read, source.take()))
                }
                other => return Err(unexpected(&other)),
            };
        }
    }
}

/// A step a local effect's machine never takes (a bug in the machine).
fn unexpected(step: &Step) -> Error {
    Error::db_other(format!("a local effect's machine asked for {step:?}"))
}
