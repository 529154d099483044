//! The relay: claims queued operations in batches and acts on each under its
//! own claim, writing back only while the claim is still its own. What it
//! counts, and the Prometheus text of it, is in `metrics`.

mod metrics;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::{join_all, BoxFuture};
use tokio::sync::watch;
use tracing::{error, info, warn};

use crate::effect::Effect;
use crate::error::{Error, Result};
use crate::guard::{Attempt, DoneAttempt, Guard, Outcome};
use crate::key::Payload;
use crate::record::State;
use crate::store::{OpClaimBatch, OpList, Store};

pub use metrics::{LatencyHistogram, RelayStats, LATENCY_BUCKETS};

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

/// How often a relay with a retention purges, at most.
pub const PURGE_EVERY: Duration = Duration::from_secs(60);

/// Relays one job type's queued operations through one effect.
pub struct Relay<'a, S: Store, E: Effect> {
    guard: &'a Guard<S>,
    effect: &'a E,
    config: RelayConfig,
    stats: Arc<RelayStats>,
    retention: Option<Duration>,
    last_purge: std::sync::Mutex<Option<Instant>>,
}

impl<'a, S: Store, E: Effect> Relay<'a, S, E> {
    /// A relay acting through `guard` (its spec names the job type, lease,
    /// timeout and policy) and `effect`.
    pub fn new(guard: &'a Guard<S>, effect: &'a E, config: RelayConfig) -> Self {
        Self {
            guard,
            effect,
            config,
            stats: Arc::default(),
            retention: None,
            last_purge: std::sync::Mutex::new(None),
        }
    }

    /// Purges this job type's finished records (completed, failed,
    /// cancelled) not updated for `retention`, with their audit trail,
    /// whenever the relay finds nothing to claim: first at once, then at
    /// most every [`PURGE_EVERY`]. Claimed, queued and held records are
    /// never purged.
    pub fn with_retention(mut self, retention: Duration) -> Self {
        self.retention = Some(retention);
        self
    }

    /// What the relay has done so far.
    pub fn stats(&self) -> &RelayStats {
        &self.stats
    }

    /// The same counters, shared: read them (say, from a metrics endpoint)
    /// while the relay runs.
    pub fn stats_handle(&self) -> Arc<RelayStats> {
        Arc::clone(&self.stats)
    }

    /// Runs until `stop` turns true (then stops claiming and lets in-flight
    /// attempts finish, each bounded by the job timeout), or, with `drain`,
    /// until nothing is queued and no claim is live. Held rows do not keep
    /// it running.
    ///
    /// A store error that passes (a lost connection, a busy file) is
    /// retried with backoff; one the database gives for good (read-only,
    /// permission denied, a missing table:
    /// [`Error::is_permanent_db_error`](crate::Error::is_permanent_db_error))
    /// ends the run with that error once the in-flight attempts are done:
    /// retrying it would only fill the log.
    pub async fn run(&self, stop: watch::Receiver<bool>) -> Result<()> {
        let loops = (0..self.config.workers.max(1)).map(|_| self.claim_loop(stop.clone()));
        join_all(loops).await.into_iter().collect()
    }

    /// Claims, acts, and writes back the round's done effects alongside the
    /// next claim: the completion and the next claim are independent (the
    /// claim takes only queued rows, the completion only this loop's claimed
    /// ones), so a loop waits out one commit per round instead of two. The
    /// effects of one round still run only after its claim and before the
    /// next claim is acted on, so a loop never has more than one round's
    /// effects in flight.
    async fn claim_loop(&self, mut stop: watch::Receiver<bool>) -> Result<()> {
        let spec = self.guard.spec();
        let mut idle = self.config.poll;
        let mut writing_back: Option<BoxFuture<'_, ()>> = None;
        while !*stop.borrow() {
            let p = OpClaimBatch {
                job_type: &spec.job_type,
                owner: self.guard.owner(),
                lease: spec.lease,
                limit: self.config.batch.max(1),
            };
            let claim = self.guard.store().op_claim_batch(&p);
            let claimed = match writing_back.take() {
                Some(write_back) => futures::join!(claim, write_back).0,
                None => claim.await,
            };
            match claimed {
                Ok(claims) if !claims.is_empty() => {
                    let claimed_at = Instant::now();
                    self.stats
                        .claims
                        .fetch_add(claims.len() as u64, Ordering::Relaxed);
                    idle = self.config.poll;
                    if *stop.borrow() {
                        self.release(&claims).await;
                        break;
                    }
                    let done = self.act(&claims, claimed_at).await;
                    writing_back = Some(Box::pin(self.write_back(done, claimed_at)));
                    continue;
                }
                Ok(_) => {
                    idle = self.config.poll;
                    self.settle_stale().await;
                    self.purge_if_due().await;
                    if self.config.drain && self.nothing_left().await {
                        break;
                    }
                }
                Err(e) if e.is_permanent_db_error() => {
                    self.stats.errors.fetch_add(1, Ordering::Relaxed);
                    error!(job = %spec.job_type, error = %e, "claim refused for good; stopping");
                    if let Some(write_back) = writing_back {
                        write_back.await;
                    }
                    return Err(e);
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
        if let Some(write_back) = writing_back {
            write_back.await;
        }
        Ok(())
    }

    /// Acts on a round's claims concurrently. Outcomes other than done are
    /// recorded one by one here; the done effects are returned for
    /// [`Relay::write_back`].
    async fn act(
        &self,
        claims: &[(crate::Record, crate::store::Claim)],
        claimed_at: Instant,
    ) -> Vec<DoneAttempt> {
        let attempts = claims
            .iter()
            .map(|(record, claim)| self.guard.attempt_claimed(record, claim, self.effect));
        let mut done = Vec::new();
        for ((record, _), attempt) in claims.iter().zip(join_all(attempts).await) {
            match attempt {
                Attempt::Done(d) => done.push(d),
                Attempt::Settled(outcome) => {
                    self.settled(&record.op_key, &outcome, Some(claimed_at))
                }
            }
        }
        done
    }

    /// Records a round's done effects: with batches, in one statement;
    /// otherwise each with its own fenced move, as a single run does.
    async fn write_back(&self, done: Vec<DoneAttempt>, claimed_at: Instant) {
        if self.config.batch > 1 {
            for (op_key, outcome) in self.guard.complete_batch(done, self.effect).await {
                self.settled(&op_key, &outcome, Some(claimed_at));
            }
            return;
        }
        let completions = done.into_iter().map(|d| async move {
            let op_key = d.op_key().to_owned();
            let outcome = self.guard.complete(d, self.effect).await;
            self.settled(&op_key, &outcome, Some(claimed_at));
        });
        join_all(completions).await;
    }

    /// Logs and counts an outcome; `claimed_at` when this relay held a
    /// claim and recorded the outcome under it (observed as effect latency).
    fn settled(&self, op_key: &str, outcome: &Result<Outcome>, claimed_at: Option<Instant>) {
        log_outcome(&self.guard.spec().job_type, op_key, outcome);
        self.stats.count(outcome);
        if let Some(at) = claimed_at {
            self.stats.effect_latency.observe(at.elapsed());
        }
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
            let started = Instant::now();
            let outcome = self.guard.run(&record.op_key, &payload, self.effect).await;
            // Another worker beat this one to the row: nothing taken over,
            // nothing recorded here.
            let beaten = matches!(
                outcome,
                Ok(Outcome::InProgress { .. }
                    | Outcome::NotDue { .. }
                    | Outcome::Done { repeat: true, .. })
            );
            if beaten {
                info!(job = %record.job_type, key = %record.op_key, stale_token = record.token, "stale claim settled by another worker");
                self.settled(&record.op_key, &outcome, None);
                continue;
            }
            self.stats.takeovers.fetch_add(1, Ordering::Relaxed);
            self.stats.claims.fetch_add(1, Ordering::Relaxed);
            info!(job = %record.job_type, key = %record.op_key, stale_token = record.token, "settled a stale claim");
            self.settled(&record.op_key, &outcome, Some(started));
        }
    }

    /// Applies the retention, when one is set and a purge is due.
    async fn purge_if_due(&self) {
        let Some(retention) = self.retention else {
            return;
        };
        {
            let mut last = self.last_purge.lock().unwrap_or_else(|e| e.into_inner());
            if last.is_some_and(|at| at.elapsed() < PURGE_EVERY) {
                return;
            }
            *last = Some(Instant::now());
        }
        let job = &self.guard.spec().job_type;
        match crate::ops::purge(self.guard.store(), Some(job), retention).await {
            Ok(0) => {}
            Ok(n) => info!(job = %job, purged = n, ?retention, "purged finished records"),
            Err(e) => warn!(job = %job, error = %e, "purge failed; will try again"),
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

    /// Gives back claims taken just as the stop arrived, before acting
    /// (a cancel requested meanwhile is kept: the claim ends cancelled).
    async fn release(&self, claims: &[(crate::Record, crate::store::Claim)]) {
        for (record, claim) in claims {
            let reason = "released unstarted at relay shutdown";
            match self.guard.release_unstarted(record, claim, reason).await {
                Ok(Outcome::RetryLater { .. }) => {
                    info!(job = %record.job_type, key = %record.op_key, "released unstarted claim")
                }
                Ok(other) => self.settled(&record.op_key, &Ok(other), None),
                Err(Error::LostClaim { .. }) => {
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
