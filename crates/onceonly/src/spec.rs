//! What a guarded job is: its type, effect kind, stale-claim policy and timing.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::key::validate_job_type;

/// What to do when nobody can tell whether an opaque effect happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StalePolicy {
    /// Hold the operation for a person: 0 extra effects, possibly a delay.
    Hold,
    /// Do it again: at most 1 extra effect.
    AtLeastOnce,
    /// Give it up as failed: at most 1 missing effect.
    AtMostOnce,
}

impl StalePolicy {
    /// Every policy.
    pub const ALL: [StalePolicy; 3] = [
        StalePolicy::Hold,
        StalePolicy::AtLeastOnce,
        StalePolicy::AtMostOnce,
    ];

    /// The name used on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            StalePolicy::Hold => "hold",
            StalePolicy::AtLeastOnce => "at-least-once",
            StalePolicy::AtMostOnce => "at-most-once",
        }
    }
}

impl fmt::Display for StalePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for StalePolicy {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        StalePolicy::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| {
                Error::Invalid(format!(
                    "unknown stale-claim policy {s:?}; one of hold, at-least-once, at-most-once"
                ))
            })
    }
}

/// How the effect can be made once (docs/DESIGN.md section 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind", content = "policy")]
pub enum EffectKind {
    /// A write in the same database: claim, effect and completion in one transaction.
    Local,
    /// The destination dedups on the idempotency key: redo with the same key.
    Keyed,
    /// The destination can be searched by the key: look first, redo if absent.
    Lookup,
    /// Neither: the policy decides when the outcome is unknown.
    Opaque(StalePolicy),
}

impl EffectKind {
    /// The kind's name (`opaque` without its policy).
    pub fn name(self) -> &'static str {
        match self {
            EffectKind::Local => "local",
            EffectKind::Keyed => "keyed",
            EffectKind::Lookup => "lookup",
            EffectKind::Opaque(_) => "opaque",
        }
    }

    /// Parses `local`, `keyed`, `lookup` or `opaque` with the given policy.
    pub fn parse(kind: &str, policy: StalePolicy) -> Result<Self> {
        match kind {
            "local" => Ok(EffectKind::Local),
            "keyed" => Ok(EffectKind::Keyed),
            "lookup" => Ok(EffectKind::Lookup),
            "opaque" => Ok(EffectKind::Opaque(policy)),
            other => Err(Error::Invalid(format!(
                "unknown effect kind {other:?}; one of local, keyed, lookup, opaque"
            ))),
        }
    }
}

impl fmt::Display for EffectKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EffectKind::Opaque(p) => write!(f, "opaque/{p}"),
            other => f.write_str(other.name()),
        }
    }
}

/// A guarded job's settings. [`JobSpec::validate`] checks the timing rules.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobSpec {
    /// The job type: `[A-Za-z0-9_.-]+`.
    pub job_type: String,
    /// The effect kind and, for opaque effects, the stale-claim policy.
    pub effect: EffectKind,
    /// How long a claim stays live without renewal.
    #[serde(with = "humantime_serde_like")]
    pub lease: Duration,
    /// The longest one attempt may run, effect and retries included.
    #[serde(with = "humantime_serde_like")]
    pub timeout: Duration,
    /// Renew the lease this often while the effect runs (for jobs longer than the lease).
    #[serde(with = "humantime_serde_opt")]
    pub heartbeat: Option<Duration>,
    /// The queue's redelivery timeout (visibility timeout, ack wait, ...), if known.
    #[serde(with = "humantime_serde_opt")]
    pub redelivery_timeout: Option<Duration>,
    /// The lifetime of any lock held around the job, if one is used.
    #[serde(with = "humantime_serde_opt")]
    pub lock_lifetime: Option<Duration>,
    /// How many times an unknown or not-sent outcome is retried under one claim.
    pub max_retries: u32,
}

impl JobSpec {
    /// A spec with the command line's defaults: lease 30s, timeout 10s, no heartbeat.
    pub fn new(job_type: impl Into<String>, effect: EffectKind) -> Self {
        Self {
            job_type: job_type.into(),
            effect,
            lease: Duration::from_secs(30),
            timeout: Duration::from_secs(10),
            heartbeat: None,
            redelivery_timeout: None,
            lock_lifetime: None,
            max_retries: 3,
        }
    }

    /// Sets the lease.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Sets the job timeout.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Renews the lease every `interval` while the effect runs.
    pub fn heartbeat(mut self, interval: Duration) -> Self {
        self.heartbeat = Some(interval);
        self
    }

    /// Declares the queue's redelivery timeout, so the rules can check it.
    pub fn redelivery_timeout(mut self, t: Duration) -> Self {
        self.redelivery_timeout = Some(t);
        self
    }

    /// Declares a lock's lifetime, so the rules can check it.
    pub fn lock_lifetime(mut self, t: Duration) -> Self {
        self.lock_lifetime = Some(t);
        self
    }

    /// Checks the job type and every timing rule of docs/DESIGN.md section 4.
    ///
    /// Returns [`Error::Timing`] naming every broken rule with its numbers,
    /// worded as every client words it (`protocol/corpus/timing.json`).
    pub fn validate(&self) -> Result<()> {
        validate_job_type(&self.job_type)?;
        let lines = timing_lines(&self.job_type, &self.broken_timing_rules());
        if lines.is_empty() {
            Ok(())
        } else {
            Err(Error::Timing(lines.join("; ")))
        }
    }

    /// Each broken timing rule as a sentence with both numbers and, in
    /// brackets, the settings to change; empty when all hold.
    pub fn broken_timing_rules(&self) -> Vec<String> {
        let mut broken = Vec::new();
        let d = |d: Duration| humantime::format_duration(d).to_string();
        if self.lease.is_zero() || self.timeout.is_zero() {
            broken.push(format!(
                "lease ({}) and timeout ({}) must both be above zero [change lease or timeout]",
                d(self.lease),
                d(self.timeout)
            ));
        }
        match self.heartbeat {
            None if self.timeout >= self.lease => broken.push(format!(
                "job timeout ({}) must be shorter than the lease ({}), or a heartbeat must renew the lease [change timeout, lease or heartbeat]",
                d(self.timeout),
                d(self.lease)
            )),
            Some(hb) if hb.is_zero() || hb > self.lease / 3 => broken.push(format!(
                "heartbeat ({}) must renew the lease at least every lease/3 ({}) [change heartbeat or lease]",
                d(hb),
                d(self.lease / 3)
            )),
            _ => {}
        }
        if let Some(redelivery) = self.redelivery_timeout {
            if redelivery <= self.timeout {
                broken.push(format!(
                    "queue redelivery timeout ({}) must be longer than the job timeout ({}) [change redelivery_timeout or timeout]",
                    d(redelivery),
                    d(self.timeout)
                ));
            }
        }
        if let Some(lock) = self.lock_lifetime {
            if lock <= self.timeout {
                broken.push(format!(
                    "lock lifetime ({}) must be longer than the job timeout ({}) [change lock_lifetime or timeout]",
                    d(lock),
                    d(self.timeout)
                ));
            }
        }
        broken
    }
}

/// One line per broken rule, `job JOB: RULE`: how a refusal names the job
/// in every client. [`Error::Timing`] joins them with `; `.
pub fn timing_lines(job_type: &str, rules: &[String]) -> Vec<String> {
    rules
        .iter()
        .map(|r| format!("job {job_type}: {r}"))
        .collect()
}

/// Parses a duration like `500ms`, `2s`, `5m`, naming the problem when it is not one.
pub fn parse_duration(text: &str) -> Result<Duration> {
    humantime::parse_duration(text).map_err(|e| {
        Error::Invalid(format!(
            "{text:?} is not a duration like 500ms, 2s or 5m: {e}"
        ))
    })
}

mod humantime_serde_like {
    use serde::Serializer;
    use std::time::Duration;
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&humantime::format_duration(*d))
    }
}

mod humantime_serde_opt {
    use serde::Serializer;
    use std::time::Duration;
    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.collect_str(&humantime::format_duration(*d)),
            None => s.serialize_none(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> JobSpec {
        JobSpec::new("send_email", EffectKind::Keyed)
    }

    #[test]
    fn defaults_hold_every_rule() {
        spec().validate().unwrap();
    }

    #[test]
    fn timeout_not_below_lease_is_refused_with_numbers() {
        let err = spec()
            .lease(Duration::from_secs(10))
            .timeout(Duration::from_secs(10))
            .validate()
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("job timeout (10s) must be shorter than the lease (10s)"),
            "{err}"
        );
    }

    #[test]
    fn a_heartbeat_lets_a_job_outlive_its_lease_only_at_lease_over_three() {
        let long = spec()
            .lease(Duration::from_secs(30))
            .timeout(Duration::from_secs(300));
        long.clone()
            .heartbeat(Duration::from_secs(10))
            .validate()
            .unwrap();
        let err = long
            .heartbeat(Duration::from_secs(11))
            .validate()
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("heartbeat (11s) must renew the lease at least every lease/3 (10s)"),
            "{err}"
        );
    }

    #[test]
    fn redelivery_and_lock_must_outlast_the_timeout() {
        let err = spec()
            .redelivery_timeout(Duration::from_secs(5))
            .lock_lifetime(Duration::from_secs(10))
            .validate()
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("queue redelivery timeout (5s) must be longer than the job timeout (10s)"),
            "{err}"
        );
        assert!(
            err.contains("lock lifetime (10s) must be longer than the job timeout (10s)"),
            "{err}"
        );
    }

    #[test]
    fn bad_job_type_is_refused() {
        assert!(JobSpec::new("no spaces", EffectKind::Keyed)
            .validate()
            .is_err());
    }
}
