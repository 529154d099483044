//! The relay: claims queued operations in batches and acts on each under its
//! own claim, writing back only while the claim is still its own.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::future::join_all;
use serde::Serialize;
use tokio::sync::watch;
use tracing::{error, info, warn};

use crate::effect::Effect;
use crate::error::{Error, Result};
use crate::guard::{Attempt, Guard, Outcome};
use crate::key::Payload;
use crate::record::State;
use crate::store::{OpClaimBatch, OpList, OpMove, Store};

/// How a relay runs.
#[derive(Debug, Clone)]
pub struct RelayConfig {
    /// Concurrent claim loops.
    pub workers: usize,
    /// Rows claimed per statement; a batch is acted on concurrently, so every
    /// row starts right after its claim and the lease covers only the timeout.
    /// Above 1, the done effects of a batch are also completed in one statement.
    pub batch: u32,
    /// How long an idle loop waits before looking again.
    pub poll: Duration,
    /// Stop once nothing is queued and no claim is live.
    pub drain: bool,
}

impl Default for RelayConfig {
    fn default() -> Self {
        Self {
            workers: 4,
            batch: 1,
            poll: Duration::from_millis(200),
            drain: false,
        }
    }
}

/// What a relay did, counted by outcome.
#[derive(Debug, Default, Serialize)]
pub struct RelayStats {
    /// Operations this relay completed.
    pub completed: AtomicU64,
    /// Deliveries that found the operation already completed.
    pub repeats: AtomicU64,
    /// Operations that failed for good.
    pub failed: AtomicU64,
    /// Operations held for a person.
    pub held: AtomicU64,
    /// Operations cancelled (withdrawn after the effect, or stopped before it).
    pub cancelled: AtomicU64,
    /// Cancels requested mid-send whose withdraw failed.
    pub withdraw_failed: AtomicU64,
    /// Attempts released to be tried again.
    pub retried: AtomicU64,
    /// Claims lost to another worker or an operator.
    pub lost_claims: AtomicU64,
    /// Database or other errors (the loop backs off and goes on).
    pub errors: AtomicU64,
}

impl RelayStats {
    fn count(&self, outcome: &Result<Outcome>) {
        let counter = match outcome {
            Ok(Outcome::Done { repeat: false, .. }) => &self.completed,
            Ok(Outcome::Done { repeat: true, .. }) => &self.repeats,
            Ok(Outcome::Failed { .. }) => &self.failed,
            Ok(Outcome::Held { .. }) => &self.held,
            Ok(Outcome::Cancelled { .. }) => &self.cancelled,
            Ok(Outcome::WithdrawFailed { .. }) => &self.withdraw_failed,
            Ok(Outcome::RetryLater { .. }) => &self.retried,
            Ok(_) => return,
            Err(Error::LostClaim { .. }) => &self.lost_claims,
            Err(_) => &self.errors,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// One line for people.
    pub fn summary(&self) -> String {
        let n = |c: &AtomicU64| c.load(Ordering::Relaxed);
        format!(
            "completed {}, repeats {}, failed {}, held {}, cancelled {}, withdraw failed {}, retried {}, lost claims {}, errors {}",
            n(&self.completed),
            n(&self.repeats),
            n(&self.failed),
            n(&self.held),
            n(&self.cancelled),
            n(&self.withdraw_failed),
            n(&self.retried),
            n(&self.lost_claims),
            n(&self.errors)
        )
    }
}

/// Relays one job type's queued operations through one effect.
pub struct Relay<'a, S: Store, E: Effect> {
    guard: &'a Guard<S>,
    effect: &'a E,
    config: RelayConfig,
    stats: RelayStats,
}

impl<'a, S: Store, E: Effect> Relay<'a, S, E> {
    /// A relay acting through `guard` (its spec names the job type, lease,
    /// timeout and policy) and `effect`.
    pub fn new(guard: &'a Guard<S>, effect: &'a E, config: RelayConfig) -> Self {
        Self {
            guard,
            effect,
            config,
            stats: RelayStats::default(),
        }
    }

    /// What the relay has done so far.
    pub fn stats(&self) -> &RelayStats {
        &self.stats
    }

    /// Runs until `stop` turns true (then stops claiming and lets in-flight
    /// attempts finish, each bounded by the job timeout), or, with `drain`,
    /// until nothing is queued and no claim is live. Held rows do not keep
    /// it running.
    pub async fn run(&self, stop: watch::Receiver<bool>) -> Result<()> {
        let loops = (0..self.config.workers.max(1)).map(|_| self.claim_loop(stop.clone()));
        join_all(loops).await;
        Ok(())
    }

    async fn claim_loop(&self, mut stop: watch::Receiver<bool>) {
        let spec = self.guard.spec();
        let mut idle = self.config.poll;
        while !*stop.borrow() {
            let p = OpClaimBatch {
                job_type: &spec.job_type,
                owner: self.guard.owner(),
                lease: spec.lease,
                limit: self.config.batch.max(1),
            };
            match self.guard.store().op_claim_batch(&p).await {
                Ok(claims) if !claims.is_empty() => {
                    idle = self.config.poll;
                    if *stop.borrow() {
                        self.release(&claims).await;
                        break;
                    }
                    if self.config.batch > 1 {
                        self.act_batched(&claims).await;
                    } else {
                        let runs = claims.iter().map(|(record, claim)| async move {
                            let outcome = self.guard.run_claimed(record, claim, self.effect).await;
                            self.settled(&record.op_key, &outcome);
                        });
                        join_all(runs).await;
                    }
                    continue;
                }
                Ok(_) => {
                    idle = self.config.poll;
                    self.settle_stale().await;
                    if self.config.drain && self.nothing_left().await {
                        break;
                    }
                }
                Err(e) => {
                    // Reconnect with backoff: the pool opens new connections
                    // on the next call; nothing is lost meanwhile.
                    self.stats.errors.fetch_add(1, Ordering::Relaxed);
                    error!(job = %spec.job_type, error = %e, retry_in = ?idle, "claim failed");
                    idle = (idle * 2).min(Duration::from_secs(5));
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(idle) => {}
                _ = stop.changed() => {}
            }
        }
    }

    /// Acts on a batch concurrently, then completes every done effect in one
    /// statement; other outcomes were recorded one by one.
    async fn act_batched(&self, claims: &[(crate::Record, crate::store::Claim)]) {
        let attempts = claims
            .iter()
            .map(|(record, claim)| self.guard.attempt_claimed(record, claim, self.effect));
        let mut done = Vec::new();
        for ((record, _), attempt) in claims.iter().zip(join_all(attempts).await) {
            match attempt {
                Attempt::Done(d) => done.push(d),
                Attempt::Settled(outcome) => self.settled(&record.op_key, &outcome),
            }
        }
        for (op_key, outcome) in self.guard.complete_batch(done, self.effect).await {
            self.settled(&op_key, &outcome);
        }
    }

    fn settled(&self, op_key: &str, outcome: &Result<Outcome>) {
        log_outcome(&self.guard.spec().job_type, op_key, outcome);
        self.stats.count(outcome);
    }

    /// Claims whose lease is over (their worker died): the policy decides.
    async fn settle_stale(&self) {
        let spec = self.guard.spec();
        let list = OpList {
            job_type: Some(&spec.job_type),
            state: Some(State::Claimed),
            lease_expired: true,
            limit: Some(self.config.batch.max(1) * 4),
        };
        let stuck = match self.guard.store().op_list(&list).await {
            Ok(rows) => rows,
            Err(e) => {
                warn!(job = %spec.job_type, error = %e, "listing stale claims failed");
                return;
            }
        };
        for record in stuck {
            let payload = Payload::stored(&record);
            let outcome = self.guard.run(&record.op_key, &payload, self.effect).await;
            info!(job = %record.job_type, key = %record.op_key, stale_token = record.token, "settled a stale claim");
            self.settled(&record.op_key, &outcome);
        }
    }

    async fn nothing_left(&self) -> bool {
        let job = &self.guard.spec().job_type;
        for state in [State::Queued, State::Claimed] {
            let list = OpList {
                job_type: Some(job),
                state: Some(state),
                lease_expired: false,
                limit: Some(1),
            };
            match self.guard.store().op_list(&list).await {
                Ok(rows) if rows.is_empty() => {}
                _ => return false,
            }
        }
        true
    }

    /// Gives back claims taken just as the stop arrived, before acting.
    async fn release(&self, claims: &[(crate::Record, crate::store::Claim)]) {
        for (record, claim) in claims {
            let mut p = OpMove::new(
                &record.job_type,
                &record.op_key,
                claim.token,
                State::Claimed,
                State::Queued,
            );
            p.error = Some("released unstarted at relay shutdown");
            match self.guard.store().op_move(&p).await {
                Ok(true) => {
                    info!(job = %record.job_type, key = %record.op_key, "released unstarted claim")
                }
                Ok(false) => {
                    warn!(job = %record.job_type, key = %record.op_key, "claim moved before release")
                }
                Err(e) => {
                    warn!(job = %record.job_type, key = %record.op_key, error = %e, "release failed; the lease will expire")
                }
            }
        }
    }
}

fn log_outcome(job: &str, key: &str, outcome: &Result<Outcome>) {
    match outcome {
        Ok(Outcome::Done {
            repeat,
            external_ref,
            ..
        }) => {
            info!(job, key, repeat, external_ref = ?external_ref, "done")
        }
        Ok(other) => info!(job, key, outcome = ?other, "settled"),
        Err(Error::LostClaim { record, .. }) => {
            warn!(job, key, state = %record.state, token = record.token, "lost the claim; wrote nothing")
        }
        Err(e) => error!(job, key, error = %e, "attempt failed"),
    }
}
