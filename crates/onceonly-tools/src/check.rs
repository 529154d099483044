//! `onceonly.toml` against the timing rules of docs/DESIGN.md section 4,
//! and against what the records show: each broken rule named with its
//! numbers; a job type whose LONGEST observed claim-to-completion time
//! exceeds half its lease or half its timeout gets a warning. The CLI
//! (`onceonly check`) prints these lines, the console shows them.

use std::time::Duration;

use onceonly::store::OpList;
use onceonly::{JobSpec, State, Store};

use crate::config::{Config, JobSettings};

/// The longest claim-to-completion time seen for one job type.
#[derive(Debug, Clone, PartialEq)]
pub struct Longest {
    /// The time.
    pub took: Duration,
    /// Its key.
    pub key: String,
    /// Of how many completed records.
    pub completed: usize,
}

/// The lines about the file's timing rules, one or more per job type
/// (`job T: timing rules hold (...)` or `job T: rule broken: ...`), and how
/// many rules are broken.
pub fn rules(config: &Config) -> (Vec<String>, usize) {
    let mut lines = Vec::new();
    let mut broken = 0;
    for settings in config.jobs.values() {
        let spec = settings.spec();
        let mut rules = spec.broken_timing_rules();
        rules.extend(destination_rule(settings));
        if rules.is_empty() {
            lines.push(format!(
                "job {}: timing rules hold ({})",
                spec.job_type,
                numbers(&spec)
            ));
        }
        for rule in &rules {
            lines.push(format!("job {}: rule broken: {rule}", spec.job_type));
        }
        broken += rules.len();
    }
    (lines, broken)
}

/// The destination rule `run` refuses to start on, if the job's settings
/// break it: the same [`onceonly_http::check_destination`] `run` calls.
/// Environment variables the shape reads are taken from the environment
/// when set (a header value they would break is then named), else left
/// empty: `check` may run where the secrets are not.
fn destination_rule(settings: &JobSettings) -> Option<String> {
    if settings.effect == onceonly::EffectKind::Local {
        return None;
    }
    let spec = settings
        .http
        .clone()
        .unwrap_or_else(onceonly_http::ShapeSpec::test_protocol);
    let env = |name: &str| Some(std::env::var(name).unwrap_or_default());
    let shape = match onceonly_http::Shape::resolve(&spec, env) {
        Ok(shape) => shape,
        Err(e) => return Some(format!("destination: {e}")),
    };
    let checked = match &settings.destination {
        Some(base) => {
            onceonly_http::check_destination(base, &shape, Some(settings.effect)).map(drop)
        }
        None => onceonly_http::check::check_shape(&shape, Some(settings.effect)),
    };
    checked.err()
}

/// The lines about what the records show, per job type of the file, and
/// how many are warnings.
pub async fn records<S: Store>(
    store: &S,
    config: &Config,
) -> onceonly::Result<(Vec<String>, usize)> {
    let mut lines = Vec::new();
    for settings in config.jobs.values() {
        let spec = settings.spec();
        let longest = longest(store, &spec.job_type).await?;
        lines.extend(judge(&spec, longest.as_ref()));
    }
    let warnings = lines.iter().filter(|l| l.contains("warning:")).count();
    Ok((lines, warnings))
}

fn numbers(spec: &JobSpec) -> String {
    let d = |d: Duration| humantime::format_duration(d).to_string();
    let o = |o: Option<Duration>| o.map_or_else(|| "-".to_owned(), d);
    format!(
        "effect {}, lease {}, timeout {}, heartbeat {}, redelivery timeout {}, lock lifetime {}",
        spec.effect,
        d(spec.lease),
        d(spec.timeout),
        o(spec.heartbeat),
        o(spec.redelivery_timeout),
        o(spec.lock_lifetime)
    )
}

/// The longest `completed_at - claimed_at` among the job type's completed records.
pub async fn longest<S: Store>(store: &S, job_type: &str) -> onceonly::Result<Option<Longest>> {
    let records = store
        .op_list(&OpList {
            job_type: Some(job_type),
            state: Some(State::Completed),
            ..OpList::default()
        })
        .await?;
    let completed = records.len();
    Ok(records
        .iter()
        .filter_map(|r| Some((r.completed_at?.since(r.claimed_at?), &r.op_key)))
        .max_by_key(|(took, _)| *took)
        .map(|(took, key)| Longest {
            took,
            key: key.clone(),
            completed,
        }))
}

/// The lines about one job type's records: the longest run against half
/// the lease and half the timeout.
pub fn judge(spec: &JobSpec, longest: Option<&Longest>) -> Vec<String> {
    let job = &spec.job_type;
    let d = |d: Duration| humantime::format_duration(d).to_string();
    let Some(l) = longest else {
        return vec![format!("job {job}: no completed records to compare with")];
    };
    let seen = format!(
        "the longest claim-to-completion time ({}, key {:?}, of {} completed)",
        d(round_ms(l.took)),
        l.key,
        l.completed
    );
    let mut lines = Vec::new();
    for (what, limit) in [("lease", spec.lease), ("timeout", spec.timeout)] {
        if l.took > limit / 2 {
            lines.push(format!(
                "job {job}: warning: {seen} is more than half the {what} ({}): raise the {what} or make the job shorter",
                d(limit)
            ));
        }
    }
    if lines.is_empty() {
        lines.push(format!(
            "job {job}: {seen} is within half the lease ({}) and half the timeout ({})",
            d(spec.lease),
            d(spec.timeout)
        ));
    }
    lines
}

fn round_ms(d: Duration) -> Duration {
    Duration::from_millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use onceonly::EffectKind;

    fn spec() -> JobSpec {
        JobSpec::new("j", EffectKind::Keyed)
            .lease(Duration::from_secs(30))
            .timeout(Duration::from_secs(10))
    }

    fn longest(secs: u64) -> Longest {
        Longest {
            took: Duration::from_secs(secs),
            key: "k".into(),
            completed: 4,
        }
    }

    #[test]
    fn within_half_is_quiet() {
        let lines = judge(&spec(), Some(&longest(5)));
        assert_eq!(lines.len(), 1);
        assert!(!lines[0].contains("warning"), "{lines:?}");
    }

    #[test]
    fn over_half_the_timeout_warns() {
        let lines = judge(&spec(), Some(&longest(6)));
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].contains("warning"), "{lines:?}");
        assert!(lines[0].contains("half the timeout (10s)"), "{lines:?}");
    }

    #[test]
    fn over_half_of_both_warns_twice() {
        let lines = judge(&spec(), Some(&longest(16)));
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[0].contains("half the lease (30s)"), "{lines:?}");
    }

    #[test]
    fn no_records() {
        assert!(judge(&spec(), None)[0].contains("no completed records"));
    }
}
