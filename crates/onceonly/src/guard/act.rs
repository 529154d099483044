//! Acting under a claim: the effect within the timeout and heartbeat, then
//! the fenced write of its outcome (or the withdraw, when a cancel came in).

use super::*;

impl<S: Store> Guard<S> {
    /// Acts under a claim this worker holds, within the job timeout, renewing
    /// the lease when a heartbeat is set.
    pub(super) async fn act<E: Effect>(
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
    pub(super) async fn perform<E: Effect>(
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
            Ok(result) => within_answer_rules(result?),
            Err(_) => EffectOutcome::Unknown(format!(
                "timed out after {} (the job timeout: the whole attempt, every request in it); the effect was stopped",
                humantime::format_duration(self.spec.timeout)
            )),
        })
    }

    /// Runs `work` while renewing the lease every heartbeat interval; stops
    /// the work (drops it) when the claim turns out lost.
    pub(super) async fn with_heartbeat(
        &self,
        ctx: &EffectCtx,
        work: impl Future<Output = Result<EffectOutcome>>,
    ) -> Result<EffectOutcome> {
        let Some(interval) = self.spec.heartbeat else {
            return work.await;
        };
        let beat = async {
            // The claim was taken (or last renewed) about now; the work must
            // not go on past a lease that could not be renewed.
            let mut renewed = tokio::time::Instant::now();
            loop {
                tokio::time::sleep(interval).await;
                let p = OpHeartbeat {
                    job_type: &ctx.job_type,
                    op_key: &ctx.op_key,
                    token: ctx.token,
                    lease: self.spec.lease,
                };
                match self.store.op_heartbeat(&p).await {
                    Ok(Some(hb)) => {
                        renewed = tokio::time::Instant::now();
                        ctx.cancel_requested
                            .store(hb.cancel_requested, Ordering::SeqCst)
                    }
                    Ok(None) => return Err(self.lost_claim(&ctx.op_key, ctx.token).await),
                    Err(e) if renewed.elapsed() + interval >= self.spec.lease => {
                        warn!(job = %ctx.job_type, key = %ctx.op_key, error = %e, "lease not renewed; stopping the effect");
                        return Ok(EffectOutcome::Unknown(format!(
                            "the lease could not be renewed ({e}); the effect was stopped before it ran out"
                        )));
                    }
                    Err(e) => {
                        warn!(job = %ctx.job_type, key = %ctx.op_key, error = %e, "heartbeat failed; will retry")
                    }
                }
            }
        };
        tokio::select! {
            outcome = work => outcome,
            stopped = beat => stopped,
        }
    }

    /// The effect, retried under the claim where the kind allows it.
    pub(super) async fn attempts<E: Effect>(
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
                        return Ok(EffectOutcome::NotSent(format!(
                            "{LOOKUP_UNAVAILABLE}: {why}"
                        )))
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
    pub(super) async fn record<E: Effect>(
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
                let p = Move::Complete
                    .op(job, key, ctx.token)
                    .with_external_ref(external_ref.as_deref())
                    .with_result(&result_text);
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
                let backoff = retry_backoff(ctx.attempt);
                let looked_up = self.looked_up(ctx, &reason);
                self.release_or_cancel(ctx, &reason, Some(backoff), looked_up)
                    .await
            }
            EffectOutcome::Failed(error) if ctx.cancel_requested() => {
                let looked_up = self.looked_up(ctx, &error);
                self.cancel_unsent(ctx, &error, looked_up).await
            }
            EffectOutcome::Failed(error) => {
                self.fenced(ctx, Move::Fail, &error).await?;
                Ok(Outcome::Failed { error: Some(error) })
            }
            EffectOutcome::Unknown(reason) => self.unknown(ctx, reason).await,
        }
    }

    /// An unknown outcome that retries under the claim did not clear: the
    /// policy decides, as for a claim past its lease.
    pub(super) async fn unknown(&self, ctx: &EffectCtx, reason: String) -> Result<Outcome> {
        let to = policy(self.spec.effect, ctx.attempt).owner_move();
        if to != Move::Release {
            self.fenced(ctx, to, &reason).await?;
            return Ok(match to {
                Move::Fail => Outcome::Failed {
                    error: Some(reason),
                },
                _ => Outcome::Held {
                    reason: Some(reason),
                },
            });
        }
        let backoff = Some(retry_backoff(ctx.attempt));
        if self.release(ctx, &reason, backoff).await? {
            return Ok(Outcome::RetryLater { reason });
        }
        // An operator asked to cancel, but the effect may exist and there is
        // no reference to withdraw: a person must look, the request kept.
        let note = format!(
            "cancel requested, but the effect's outcome is unknown ({reason}); check the destination"
        );
        self.fenced(ctx, Move::Hold, &note).await?;
        Ok(Outcome::Held { reason: Some(note) })
    }

    /// Releases a claim whose effect surely did not happen, to be retried
    /// after `backoff`; when an operator asked to cancel it, cancels it
    /// instead, or holds it when an earlier claim may have acted
    /// ([`cancel_unsent`]; `looked_up`: a lookup under this claim found
    /// nothing).
    pub(super) async fn release_or_cancel(
        &self,
        ctx: &EffectCtx,
        reason: &str,
        backoff: Option<Duration>,
        looked_up: bool,
    ) -> Result<Outcome> {
        if self.release(ctx, reason, backoff).await? {
            return Ok(Outcome::RetryLater {
                reason: reason.to_owned(),
            });
        }
        let note = format!("cancel requested; the effect was not sent ({reason})");
        self.cancel_unsent(ctx, &note, looked_up).await
    }

    /// Whether a lookup under this claim found nothing before `reason`
    /// (a lookup effect looks first on every claim after the first).
    fn looked_up(&self, ctx: &EffectCtx, reason: &str) -> bool {
        self.spec.effect == EffectKind::Lookup
            && ctx.attempt > 1
            && !reason.starts_with(LOOKUP_UNAVAILABLE)
    }

    /// A cancel was requested and this claim did not act: cancelled, or,
    /// when an earlier claim may have acted, held for a person
    /// ([`cancel_unsent`]).
    pub(super) async fn cancel_unsent(
        &self,
        ctx: &EffectCtx,
        note: &str,
        looked_up: bool,
    ) -> Result<Outcome> {
        match cancel_unsent(ctx.attempt, looked_up) {
            Move::CancelClaimed => {
                self.fenced(ctx, Move::CancelClaimed, note).await?;
                Ok(Outcome::Cancelled {
                    withdrawn_ref: None,
                })
            }
            _ => {
                let note = format!(
                    "{note}; an earlier claim of this operation may have acted: check the destination"
                );
                self.fenced(ctx, Move::Hold, &note).await?;
                Ok(Outcome::Held { reason: Some(note) })
            }
        }
    }

    /// Releases our claim to queued unless an operator asked to cancel it.
    ///
    /// `Ok(true)`: released. `Ok(false)`: a cancel is pending and the claim
    /// is still ours (releasing would drop the request and let the next
    /// delivery act). [`Error::LostClaim`] when the claim is gone.
    pub(super) async fn release(
        &self,
        ctx: &EffectCtx,
        reason: &str,
        backoff: Option<Duration>,
    ) -> Result<bool> {
        let mut p = Move::Release
            .op(&ctx.job_type, &ctx.op_key, ctx.token)
            .with_error(reason);
        p.retry_after = backoff;
        if self.store.op_move(&p).await? {
            self.audit_release(ctx, reason, backoff).await;
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

    /// Appends the release just made: a [`AuditKind::Retry`] when a try
    /// failed (it has a backoff), a [`AuditKind::Released`] when the claim
    /// was given back unstarted (due at once), each with the attempt.
    async fn audit_release(&self, ctx: &EffectCtx, reason: &str, backoff: Option<Duration>) {
        let event = match backoff {
            Some(_) => AuditKind::Retry,
            None => AuditKind::Released,
        };
        let p = OpAudit {
            job_type: &ctx.job_type,
            op_key: &ctx.op_key,
            event,
            actor: &self.owner,
            token: ctx.token,
            from: Some(State::Claimed),
            to: Some(State::Queued),
            detail: Some(reason),
            attempt: Some(ctx.attempt),
            retry_after: Some(backoff.unwrap_or_default()),
        };
        append(&self.store, &p).await;
    }

    /// Takes the owner's move `to` (fail, hold or cancel), or reports the
    /// claim lost.
    pub(super) async fn fenced(&self, ctx: &EffectCtx, to: Move, reason: &str) -> Result<()> {
        let p = to
            .op(&ctx.job_type, &ctx.op_key, ctx.token)
            .with_error(reason);
        if self.store.op_move(&p).await? {
            let event = match to {
                Move::Hold => AuditKind::Hold,
                Move::CancelClaimed => AuditKind::Cancelled,
                _ => AuditKind::Failed,
            };
            let states = [to.from(), to.to()];
            self.audit(&ctx.op_key, event, ctx.token, states, reason)
                .await;
            Ok(())
        } else {
            Err(self.lost_claim(&ctx.op_key, ctx.token).await)
        }
    }

    /// The completion changed nothing: either an operator asked to cancel
    /// while the effect ran (withdraw it), or the claim is gone.
    pub(super) async fn completion_refused<E: Effect>(
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
        let (to, outcome, note, event) = match withdrawn {
            WithdrawOutcome::Withdrawn => (
                Move::CancelClaimed,
                Outcome::Cancelled {
                    withdrawn_ref: external_ref.clone(),
                },
                "cancel requested while the effect ran; withdrawn at the destination".to_owned(),
                AuditKind::Compensated,
            ),
            WithdrawOutcome::NotWithdrawn(error) => {
                let note = format!(
                    "cancel requested while the effect ran, but the withdraw failed ({error}); the item is live at the destination"
                );
                (
                    Move::CompleteWithdrawFailed,
                    Outcome::WithdrawFailed {
                        external_ref: external_ref.clone(),
                        error,
                    },
                    note,
                    AuditKind::WithdrawFailed,
                )
            }
        };
        let p = to
            .op(&ctx.job_type, &ctx.op_key, ctx.token)
            .with_external_ref(external_ref.as_deref())
            .with_result(result_text)
            .with_error(&note);
        warn!(job = %ctx.job_type, key = %ctx.op_key, %note, "compensation");
        if self.store.op_move(&p).await? {
            self.audit(&ctx.op_key, event, ctx.token, [to.from(), to.to()], &note)
                .await;
            Ok(outcome)
        } else {
            Err(self.lost_claim(&ctx.op_key, ctx.token).await)
        }
    }
}

/// How a not-sent outcome from an unanswered lookup begins.
const LOOKUP_UNAVAILABLE: &str = "lookup unavailable";

/// How long a released operation waits before it is due again: 500ms after
/// the first claim, doubling per claim, at most a minute, so a destination
/// that is down is not hammered by the relay.
fn retry_backoff(attempt: i64) -> Duration {
    let doublings = u32::try_from(attempt.saturating_sub(1).clamp(0, 7)).unwrap_or(7);
    (Duration::from_millis(500) * 2u32.pow(doublings)).min(Duration::from_secs(60))
}

/// A done effect whose reference or result breaks the answer rules
/// (crate::answer) broke the protocol, as a 2xx without an id does: failed
/// for good, with the rule named, and nothing of the answer stored.
fn within_answer_rules(outcome: EffectOutcome) -> EffectOutcome {
    let EffectOutcome::Done {
        external_ref,
        result,
    } = &outcome
    else {
        return outcome;
    };
    let broken = external_ref
        .as_deref()
        .map_or(Ok(()), crate::answer::check_reference)
        .and_then(|()| crate::answer::check_result(&result.to_string()));
    match broken {
        Ok(()) => outcome,
        Err(e) => EffectOutcome::Failed(e.to_string()),
    }
}
