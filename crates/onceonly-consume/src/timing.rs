//! docs/DESIGN.md section 4's queue rule, held against what the broker says.
//!
//! Without a heartbeat, the broker's redelivery timeout must be longer than
//! the job timeout, or the broker hands the message to a second worker
//! while the first still acts. With a heartbeat, every beat renews the
//! lease and tells the broker the worker is alive (progress), so the rule
//! becomes the lease's: a beat at least every redelivery timeout / 3.
//! A delivery limit must leave room for a crash: the dead worker's
//! delivery, one handed back while its claim's lease runs out, and the one
//! that settles it.

use std::time::Duration;

use onceonly::JobSpec;

use crate::broker::Redelivery;
use crate::error::{Error, Result};

/// The fewest deliveries a limited broker must allow.
pub const MIN_DELIVERIES: u64 = 3;

fn d(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

/// Each broken rule as a sentence naming both values; empty when all hold.
pub fn broken_rules(spec: &JobSpec, redelivery: &Redelivery) -> Vec<String> {
    let mut broken = Vec::new();
    let (source, name, t) = (
        &redelivery.source,
        redelivery.timeout_name,
        redelivery.timeout,
    );
    match spec.heartbeat {
        None if t <= spec.timeout => broken.push(format!(
            "{source}: {name} ({}) must be longer than the job timeout ({}), or a heartbeat must renew it (--heartbeat at most {name}/3)",
            d(t),
            d(spec.timeout)
        )),
        Some(hb) if hb > t / 3 => broken.push(format!(
            "{source}: the heartbeat ({}) must tell the broker the worker is alive at least every {name}/3 ({}; {name} is {})",
            d(hb),
            d(t / 3),
            d(t)
        )),
        _ => {}
    }
    if let Some(n) = redelivery.max_deliveries {
        if n < MIN_DELIVERIES {
            broken.push(format!(
                "{source}: {} ({n}) must be unlimited or at least {MIN_DELIVERIES}: a crashed worker's delivery, one handed back while its claim's lease ({}) runs out, and the one that settles it",
                redelivery.limit_name,
                d(spec.lease)
            ));
        }
    }
    broken
}

/// Refuses settings that break a rule, naming each with both values.
pub fn check(spec: &JobSpec, redelivery: &Redelivery) -> Result<()> {
    let broken = broken_rules(spec, redelivery);
    if broken.is_empty() {
        Ok(())
    } else {
        Err(Error::Timing(format!(
            "job {}: {}",
            spec.job_type,
            broken.join("; ")
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use onceonly::EffectKind;

    fn redelivery(secs: u64, max: Option<u64>) -> Redelivery {
        Redelivery {
            timeout: Duration::from_secs(secs),
            max_deliveries: max,
            source: "SQS queue q".into(),
            timeout_name: "VisibilityTimeout",
            limit_name: "maxReceiveCount",
        }
    }

    fn spec() -> JobSpec {
        JobSpec::new("j", EffectKind::Keyed)
    }

    #[test]
    fn shorter_than_the_job_timeout_is_refused_naming_both() {
        let err = check(&spec(), &redelivery(5, None))
            .unwrap_err()
            .to_string();
        assert!(err.contains("VisibilityTimeout (5s)"), "{err}");
        assert!(err.contains("job timeout (10s)"), "{err}");
        assert!(
            check(&spec(), &redelivery(10, None)).is_err(),
            "equal is not longer"
        );
        assert!(check(&spec(), &redelivery(11, None)).is_ok());
    }

    #[test]
    fn a_heartbeat_renews_it_at_a_third() {
        let hb = spec().heartbeat(Duration::from_secs(2));
        assert!(check(&hb, &redelivery(6, None)).is_ok());
        let err = check(&hb, &redelivery(5, None)).unwrap_err().to_string();
        assert!(err.contains("heartbeat (2s)"), "{err}");
        assert!(err.contains("VisibilityTimeout is 5s"), "{err}");
    }

    #[test]
    fn a_delivery_limit_leaves_room_for_a_crash() {
        assert!(check(&spec(), &redelivery(30, Some(3))).is_ok());
        let err = check(&spec(), &redelivery(30, Some(2)))
            .unwrap_err()
            .to_string();
        assert!(err.contains("maxReceiveCount (2)"), "{err}");
    }
}
