//! The relay: claims queued operations in batches and acts on each under its
//! own claim, writing back only while the claim is still its own.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::{join_all, BoxFuture};
use serde::Serialize;
use tokio::sync::watch;
use tracing::{error, info, warn};

use crate::effect::Effect;
use crate::error::{Error, Result};
use crate::guard::{Attempt, DoneAttempt, Guard, Outcome};
use crate::key::Payload;
use crate::record::State;
use crate::store::{OpClaimBatch, OpList, Store};

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

/// Upper bounds, in seconds, of the effect latency histogram's buckets.
pub const LATENCY_BUCKETS: [f64; 12] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// Claim to recorded outcome, in fixed buckets ([`LATENCY_BUCKETS`]).
/// Observing takes no lock and allocates nothing.
#[derive(Debug, Default, Serialize)]
pub struct LatencyHistogram {
    /// Observations per bucket (not cumulative): `buckets[i]` counts those
    /// above the previous bound and at most `LATENCY_BUCKETS[i]`.
    buckets: [AtomicU64; LATENCY_BUCKETS.len()],
    /// Sum of all observations, in microseconds.
    sum_micros: AtomicU64,
    /// Number of observations, those above the last bound included.
    count: AtomicU64,
}

impl LatencyHistogram {
    /// Records one observation.
    pub fn observe(&self, elapsed: Duration) {
        let secs = elapsed.as_secs_f64();
        if let Some(i) = LATENCY_BUCKETS.iter().position(|&bound| secs <= bound) {
            self.buckets[i].fetch_add(1, Ordering::Relaxed);
        }
        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        self.sum_micros.fetch_add(micros, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// Number of observations.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// Sum of all observations.
    pub fn sum(&self) -> Duration {
        Duration::from_micros(self.sum_micros.load(Ordering::Relaxed))
    }

    /// Cumulative counts per bound (Prometheus `le` buckets, `+Inf` last).
    /// Read while observations go on, each stays at most the next.
    pub fn cumulative(&self) -> [u64; LATENCY_BUCKETS.len() + 1] {
        let mut out = [0; LATENCY_BUCKETS.len() + 1];
        let mut total = 0;
        for (slot, bucket) in out.iter_mut().zip(&self.buckets) {
            total += bucket.load(Ordering::Relaxed);
            *slot = total;
        }
        out[LATENCY_BUCKETS.len()] = self.count().max(total);
        out
    }
}

/// What a relay did, counted by outcome. Shared with readers (a metrics
/// endpoint) through [`Relay::stats_handle`]; every counter only grows.
#[derive(Debug, Default, Serialize)]
pub struct RelayStats {
    /// Rows this relay claimed: queued rows claimed in batches, plus stale
    /// claims it took over.
    pub claims: AtomicU64,
    /// Stale claims (past their lease) this relay settled: taken over and
    /// redone, held or failed as the policy says.
    pub takeovers: AtomicU64,
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
    /// Of the cancelled, those withdrawn at the destination after the effect.
    pub compensated: AtomicU64,
    /// Cancels requested mid-send whose withdraw failed.
    pub withdraw_failed: AtomicU64,
    /// Attempts released to be tried again.
    pub retried: AtomicU64,
    /// Claims lost to another worker or an operator.
    pub lost_claims: AtomicU64,
    /// Database or other errors (the loop backs off and goes on).
    pub errors: AtomicU64,
    /// Claim to recorded outcome, for every outcome this relay recorded.
    pub effect_latency: LatencyHistogram,
}

impl RelayStats {
    fn count(&self, outcome: &Result<Outcome>) {
        let counter = match outcome {
            Ok(Outcome::Done { repeat: false, .. }) => &self.completed,
            Ok(Outcome::Done { repeat: true, .. }) => &self.repeats,
            Ok(Outcome::Failed { .. }) => &self.failed,
            Ok(Outcome::Held { .. }) => &self.held,
            Ok(Outcome::Cancelled { withdrawn_ref }) => {
                if withdrawn_ref.is_some() {
                    self.compensated.fetch_add(1, Ordering::Relaxed);
                }
                &self.cancelled
            }
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
            "completed {}, repeats {}, failed {}, held {}, cancelled {}, compensated {}, withdraw failed {}, retried {}, lost claims {}, claims {}, take-overs {}, errors {}",
            n(&self.completed),
            n(&self.repeats),
            n(&self.failed),
            n(&self.held),
            n(&self.cancelled),
            n(&self.compensated),
            n(&self.withdraw_failed),
            n(&self.retried),
            n(&self.lost_claims),
            n(&self.claims),
            n(&self.takeovers),
            n(&self.errors)
        )
    }

    /// The counters and the latency histogram in the Prometheus text
    /// exposition format (0.0.4), each with a `job_type` label.
    pub fn render_prometheus(&self, job_type: &str) -> String {
        use std::fmt::Write;

        let label = escape_label(job_type);
        let counters: [(&str, &str, &AtomicU64); 12] = [
            (
                "onceonly_claims_total",
                "Rows claimed: queued rows claimed in batches, plus stale claims taken over.",
                &self.claims,
            ),
            (
                "onceonly_completions_total",
                "Operations completed by this relay.",
                &self.completed,
            ),
            (
                "onceonly_repeats_suppressed_total",
                "Deliveries that found the operation already completed and did not act.",
                &self.repeats,
            ),
            (
                "onceonly_takeovers_total",
                "Stale claims (past their lease) settled by this relay.",
                &self.takeovers,
            ),
            (
                "onceonly_holds_total",
                "Operations held for a person.",
                &self.held,
            ),
            (
                "onceonly_lost_claims_total",
                "Claims lost to another worker or an operator; nothing was written.",
                &self.lost_claims,
            ),
            (
                "onceonly_cancels_total",
                "Operations cancelled, before the effect or withdrawn after it.",
                &self.cancelled,
            ),
            (
                "onceonly_compensations_total",
                "Cancelled operations withdrawn at the destination after the effect.",
                &self.compensated,
            ),
            (
                "onceonly_withdraw_failures_total",
                "Cancels requested mid-send whose withdraw failed; the item stays live.",
                &self.withdraw_failed,
            ),
            (
                "onceonly_failures_total",
                "Operations that failed for good.",
                &self.failed,
            ),
            (
                "onceonly_retries_total",
                "Attempts released to be tried again.",
                &self.retried,
            ),
            (
                "onceonly_errors_total",
                "Database or other errors.",
                &self.errors,
            ),
        ];
        let mut out = String::with_capacity(4096);
        for (name, help, counter) in counters {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} counter");
            let _ = writeln!(
                out,
                "{name}{{job_type=\"{label}\"}} {}",
                counter.load(Ordering::Relaxed)
            );
        }
        let name = "onceonly_effect_seconds";
        let h = &self.effect_latency;
        let cumulative = h.cumulative();
        let _ = writeln!(
            out,
            "# HELP {name} Time from claim to recorded outcome, per operation."
        );
        let _ = writeln!(out, "# TYPE {name} histogram");
        for (bound, n) in LATENCY_BUCKETS.iter().zip(&cumulative) {
            let _ = writeln!(
                out,
                "{name}_bucket{{job_type=\"{label}\",le=\"{bound}\"}} {n}"
            );
        }
        let total = cumulative[LATENCY_BUCKETS.len()];
        let _ = writeln!(
            out,
            "{name}_bucket{{job_type=\"{label}\",le=\"+Inf\"}} {total}"
        );
        let _ = writeln!(
            out,
            "{name}_sum{{job_type=\"{label}\"}} {}",
            h.sum().as_secs_f64()
        );
        let _ = writeln!(out, "{name}_count{{job_type=\"{label}\"}} {total}");
        out
    }
}

/// A label value as the text format wants it: backslash, double quote and
/// line feed escaped.
fn escape_label(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
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

#[cfg(test)]
mod tests {
    use super::*;

    fn value<'a>(text: &'a str, series: &str) -> &'a str {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
            .unwrap_or_else(|| panic!("no {series} in\n{text}"))
    }

    #[test]
    fn counters_render_with_help_type_and_label() {
        let stats = RelayStats::default();
        stats.claims.fetch_add(3, Ordering::Relaxed);
        stats.count(&Ok(Outcome::Done {
            result: serde_json::Value::Null,
            external_ref: None,
            repeat: false,
        }));
        stats.count(&Ok(Outcome::Done {
            result: serde_json::Value::Null,
            external_ref: None,
            repeat: true,
        }));
        stats.count(&Ok(Outcome::Cancelled {
            withdrawn_ref: Some("item-1".into()),
        }));
        stats.count(&Ok(Outcome::Cancelled {
            withdrawn_ref: None,
        }));
        let text = stats.render_prometheus("email");
        for (name, n) in [
            ("onceonly_claims_total", "3"),
            ("onceonly_completions_total", "1"),
            ("onceonly_repeats_suppressed_total", "1"),
            ("onceonly_cancels_total", "2"),
            ("onceonly_compensations_total", "1"),
            ("onceonly_takeovers_total", "0"),
            ("onceonly_holds_total", "0"),
            ("onceonly_lost_claims_total", "0"),
            ("onceonly_withdraw_failures_total", "0"),
            ("onceonly_failures_total", "0"),
            ("onceonly_retries_total", "0"),
            ("onceonly_errors_total", "0"),
        ] {
            assert!(
                text.contains(&format!("\n# HELP {name} "))
                    || text.starts_with(&format!("# HELP {name} ")),
                "{name}"
            );
            assert!(text.contains(&format!("# TYPE {name} counter\n")), "{name}");
            assert_eq!(
                value(&text, &format!("{name}{{job_type=\"email\"}}")),
                n,
                "{name}"
            );
        }
        assert!(text.contains("# TYPE onceonly_effect_seconds histogram\n"));
        assert!(text.ends_with('\n'));
        // Every sample line carries the label.
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            assert!(line.contains("{job_type=\"email\""), "{line}");
        }
    }

    #[test]
    fn histogram_buckets_are_cumulative_with_inf_sum_and_count() {
        let stats = RelayStats::default();
        for ms in [1, 5, 7, 300, 40_000] {
            stats.effect_latency.observe(Duration::from_millis(ms));
        }
        let text = stats.render_prometheus("j");
        let bucket = |le: &str| {
            value(
                &text,
                &format!("onceonly_effect_seconds_bucket{{job_type=\"j\",le=\"{le}\"}}"),
            )
            .parse::<u64>()
            .unwrap()
        };
        assert_eq!(bucket("0.005"), 2, "1ms and 5ms (bounds are inclusive)");
        assert_eq!(bucket("0.01"), 3);
        assert_eq!(bucket("0.25"), 3);
        assert_eq!(bucket("0.5"), 4);
        assert_eq!(bucket("30"), 4);
        assert_eq!(bucket("+Inf"), 5, "40s lands only in +Inf");
        let les: Vec<&str> = text
            .lines()
            .filter_map(|l| l.split("le=\"").nth(1)?.split('"').next())
            .collect();
        assert_eq!(les.len(), LATENCY_BUCKETS.len() + 1);
        assert_eq!(les.last(), Some(&"+Inf"));
        let counts: Vec<u64> = les.iter().map(|le| bucket(le)).collect();
        assert!(counts.windows(2).all(|w| w[0] <= w[1]), "{counts:?}");
        assert_eq!(
            value(&text, "onceonly_effect_seconds_count{job_type=\"j\"}"),
            "5"
        );
        let sum: f64 = value(&text, "onceonly_effect_seconds_sum{job_type=\"j\"}")
            .parse()
            .unwrap();
        assert!((sum - 40.313).abs() < 1e-9, "{sum}");
    }

    #[test]
    fn label_values_are_escaped() {
        let text = RelayStats::default().render_prometheus("a\"b\\c\nd");
        assert!(text.contains("onceonly_claims_total{job_type=\"a\\\"b\\\\c\\nd\"} 0"));
    }
}
