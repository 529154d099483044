//! Local effects: claim and completion inside the caller's transaction.

use super::*;

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
        let p = Move::Complete
            .op(&self.spec.job_type, &claim.op_key, claim.claim.token)
            .with_result(&result_text);
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
                Ok(Err(source)) => {
                    return Err(Error::LocalEffect {
                        job_type: self.spec.job_type.clone(),
                        op_key: op_key.to_owned(),
                        source,
                    })
                }
                Err(_) => return Err(Error::Timeout(self.spec.timeout)),
            };
        let outcome = self.complete_in(&mut tx, &claim, &result).await?;
        S::commit(tx).await?;
        Ok(outcome)
    }

    pub(super) async fn lost_claim_in(
        &self,
        conn: &mut S::Conn,
        op_key: &str,
        token: i64,
    ) -> Error {
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
