//! What a relay counts ([`RelayStats`]: outcomes, claims, the effect
//! latency histogram) and its Prometheus text exposition, which
//! `onceonly run --metrics` serves.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::guard::Outcome;

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
    /// Counts one recorded outcome under its counter.
    pub(super) fn count(&self, outcome: &Result<Outcome>) {
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
