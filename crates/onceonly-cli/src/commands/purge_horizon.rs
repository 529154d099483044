//! How long a finished record must be kept to stop a repeat: the longest
//! redelivery horizon `purge` knows of. A record purged sooner lets a late
//! redelivery (a queue's visibility timeout, a claim's lease running out)
//! find no record and run the effect again.

use std::fmt;
use std::time::Duration;

use onceonly::store::OpList;
use onceonly::{JobSpec, State, Store};

use super::config::Config;

/// One horizon and where it was learnt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Horizon {
    /// How long.
    pub length: Duration,
    /// The job type it is of (`*`: every one).
    pub job: String,
    /// Where it was learnt, in words.
    pub source: String,
}

impl fmt::Display for Horizon {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let job = match self.job.as_str() {
            "*" => "every job type".to_owned(),
            job => format!("job {job}"),
        };
        write!(
            f,
            "{} of {job} ({})",
            humantime::format_duration(self.length),
            self.source
        )
    }
}

/// The longest horizon of the job types purged (`job`, or every one): the
/// lease, timeout and redelivery timeout each job has in the settings file,
/// and the lease stored on each live claim. A job with no lease known from
/// either has the lease `run` defaults to.
pub async fn longest<S: Store>(
    store: &S,
    job: Option<&str>,
    config: Option<&Config>,
) -> onceonly::Result<Horizon> {
    let mut known = Vec::new();
    if let Some(config) = config {
        let file = config.path.display();
        for settings in config.jobs.values() {
            if job.is_some_and(|j| j != settings.job_type) {
                continue;
            }
            for (name, length) in [
                ("lease", settings.lease),
                ("timeout", settings.timeout),
                ("redelivery_timeout", settings.redelivery_timeout),
            ] {
                if let Some(length) = length {
                    known.push(Horizon {
                        length,
                        job: settings.job_type.clone(),
                        source: format!("its {name} in {file}"),
                    });
                }
            }
        }
    }
    let live = OpList {
        job_type: job,
        state: Some(State::Claimed),
        lease_expired: false,
        limit: None,
    };
    for r in store.op_list(&live).await? {
        if let (Some(from), Some(until)) = (r.claimed_at, r.lease_until) {
            known.push(Horizon {
                length: until.since(from),
                job: r.job_type.clone(),
                source: format!("the lease stored on its live claim {}", r.op_key),
            });
        }
    }
    // Without a lease in the settings file, the one `run` defaults to.
    let file_gives_lease = config.is_some_and(|c| {
        c.jobs
            .values()
            .any(|s| s.lease.is_some() && job.is_none_or(|j| j == s.job_type))
    });
    if !file_gives_lease {
        known.push(Horizon {
            length: JobSpec::new("default", onceonly::EffectKind::Keyed).lease,
            job: job.unwrap_or("*").to_owned(),
            source: "the lease `run` takes when given no --lease".to_owned(),
        });
    }
    Ok(known
        .into_iter()
        .max_by_key(|h| h.length)
        .expect("the default lease is always known"))
}
