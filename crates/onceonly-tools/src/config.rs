//! The job settings file, `onceonly.toml`, read by `run --config` and
//! `check`. One table per job type:
//!
//! ```toml
//! [jobs.send_receipt]
//! effect = "opaque"              # local, keyed, lookup or opaque
//! policy = "hold"                # opaque only: hold, at-least-once, at-most-once
//! lease = "30s"
//! timeout = "10s"
//! heartbeat = "10s"              # renew the lease this often (optional)
//! destination = "http://mail.internal:8080"
//! redelivery_timeout = "5m"      # the queue's visibility timeout, ack wait, ...
//! lock_lifetime = "1m"           # any lock held around the job
//! max_retries = 3
//! retention = "30d"              # a running relay purges finished records older than this
//! ca_cert = "private-ca.pem"     # PEM CAs trusted next to the system's (relative to this file)
//!
//! [jobs.send_receipt.http]       # the destination's request shape (docs/destinations.md)
//! url = "{base}/v1/messages"
//! headers = { Authorization = "Bearer {env.MAIL_TOKEN}" }
//! ```
//!
//! A file that does not parse, names an unknown field or holds a bad value
//! is refused with the file, line, column and field named.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use onceonly::{EffectKind, JobSpec, StalePolicy};
use onceonly_http::{Shape, ShapeSpec};
use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use toml::Spanned;

/// The settings file, parsed.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where it was read from.
    pub path: PathBuf,
    /// Every job type's settings, by name.
    pub jobs: BTreeMap<String, JobSettings>,
}

/// One job type's settings as the file gives them; `None` where it is silent.
#[derive(Debug, Clone, PartialEq)]
pub struct JobSettings {
    /// The job type.
    pub job_type: String,
    /// The effect kind, with the policy for opaque effects (hold when not given).
    pub effect: EffectKind,
    /// How long a claim is live.
    pub lease: Option<Duration>,
    /// The whole attempt.
    pub timeout: Option<Duration>,
    /// Lease renewal interval.
    pub heartbeat: Option<Duration>,
    /// The HTTP destination's base URL.
    pub destination: Option<String>,
    /// The queue's redelivery timeout.
    pub redelivery_timeout: Option<Duration>,
    /// The lifetime of a lock held around the job.
    pub lock_lifetime: Option<Duration>,
    /// Retries of an unknown or not-sent outcome under one claim.
    pub max_retries: Option<u32>,
    /// A running relay purges this job type's finished records older than this.
    pub retention: Option<Duration>,
    /// A PEM file of CAs trusted next to the system's (made relative to
    /// the settings file's folder).
    pub ca_cert: Option<PathBuf>,
    /// The destination's request shape; `None` is the default shape.
    pub http: Option<ShapeSpec>,
}

impl JobSettings {
    /// The job's spec: the file's settings over the command line's defaults.
    pub fn spec(&self) -> JobSpec {
        let mut spec = JobSpec::new(&self.job_type, self.effect);
        if let Some(d) = self.lease {
            spec.lease = d;
        }
        if let Some(d) = self.timeout {
            spec.timeout = d;
        }
        if let Some(n) = self.max_retries {
            spec.max_retries = n;
        }
        spec.heartbeat = self.heartbeat;
        spec.redelivery_timeout = self.redelivery_timeout;
        spec.lock_lifetime = self.lock_lifetime;
        spec
    }
}

impl Config {
    /// Reads and parses the file at `path`.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the settings file {}", path.display()))?;
        Self::parse(path, &text).map_err(anyhow::Error::msg)
    }

    /// Parses `text`, naming `path` in errors.
    pub fn parse(path: &Path, text: &str) -> Result<Self, String> {
        let at = |span: Option<std::ops::Range<usize>>| match span {
            Some(span) => {
                let (line, col) = line_col(text, span.start);
                format!("{}:{line}:{col}", path.display())
            }
            None => path.display().to_string(),
        };
        let de = toml::de::Deserializer::parse(text)
            .map_err(|e| format!("{}: not valid TOML: {}", at(e.span()), e.message().trim()))?;
        let file: FileDe = serde_path_to_error::deserialize(de).map_err(|e| {
            // toml's Spanned wrapper shows up in the path under its serde
            // name; the user wrote only the field.
            let field = e
                .path()
                .to_string()
                .replace(".$__serde_spanned_private_value", "");
            let inner = e.inner();
            if field.is_empty() || field == "." {
                format!("{}: {}", at(inner.span()), inner.message().trim())
            } else {
                format!(
                    "{}: field {field}: {}",
                    at(inner.span()),
                    inner.message().trim()
                )
            }
        })?;
        let mut jobs = BTreeMap::new();
        for (name, job) in file.jobs {
            let job_type = name.0;
            let field = |f: &str| format!("field jobs.{job_type}.{f}");
            let policy = match (job.effect.get_ref(), &job.policy) {
                (EffectName::Opaque, Some(p)) => p.get_ref().0,
                (EffectName::Opaque, None) => StalePolicy::Hold,
                (other, Some(p)) => {
                    return Err(format!(
                    "{}: {}: a policy applies to effect \"opaque\" only; a {} effect redoes safely",
                    at(Some(p.span())),
                    field("policy"),
                    other.name()
                ))
                }
                (_, None) => StalePolicy::Hold,
            };
            let effect = EffectKind::parse(job.effect.get_ref().name(), policy).map_err(|e| {
                format!("{}: {}: {e}", at(Some(job.effect.span())), field("effect"))
            })?;
            if let Some(dest) = &job.destination {
                let url = dest.get_ref();
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(format!(
                        "{}: {}: {url:?} is not an http:// or https:// base URL",
                        at(Some(dest.span())),
                        field("destination")
                    ));
                }
            }
            if let Some(http) = &job.http {
                // Every variable reads as empty here: the shape's form is
                // checked now, the environment when a worker starts.
                Shape::resolve(http.get_ref(), |_| Some(String::new()))
                    .and_then(|shape| shape.check_effect(effect))
                    .map_err(|e| format!("{}: {}: {e}", at(Some(http.span())), field("http")))?;
            }
            let base = path.parent().unwrap_or(Path::new(""));
            let settings = JobSettings {
                job_type: job_type.clone(),
                effect,
                lease: job.lease.map(|d| d.0),
                timeout: job.timeout.map(|d| d.0),
                heartbeat: job.heartbeat.map(|d| d.0),
                destination: job.destination.map(Spanned::into_inner),
                redelivery_timeout: job.redelivery_timeout.map(|d| d.0),
                lock_lifetime: job.lock_lifetime.map(|d| d.0),
                max_retries: job.max_retries,
                retention: job.retention.map(|d| d.0),
                ca_cert: job.ca_cert.map(|p| base.join(p)),
                http: job.http.map(Spanned::into_inner),
            };
            jobs.insert(job_type, settings);
        }
        Ok(Self {
            path: path.to_owned(),
            jobs,
        })
    }

    /// The settings of `job_type`, or an error naming the file and the job
    /// types it has.
    pub fn job(&self, job_type: &str) -> anyhow::Result<&JobSettings> {
        self.jobs.get(job_type).ok_or_else(|| {
            let known: Vec<&str> = self.jobs.keys().map(String::as_str).collect();
            anyhow::anyhow!(
                "{} has no [jobs.{job_type}] table; it has: {}",
                self.path.display(),
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            )
        })
    }
}

/// 1-based line and column of a byte offset.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDe {
    #[serde(default)]
    jobs: BTreeMap<JobName, JobDe>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table of job settings")]
struct JobDe {
    effect: Spanned<EffectName>,
    policy: Option<Spanned<StalePolicyName>>,
    lease: Option<Dur>,
    timeout: Option<Dur>,
    heartbeat: Option<Dur>,
    destination: Option<Spanned<String>>,
    redelivery_timeout: Option<Dur>,
    lock_lifetime: Option<Dur>,
    max_retries: Option<u32>,
    retention: Option<Dur>,
    ca_cert: Option<PathBuf>,
    http: Option<Spanned<ShapeSpec>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum EffectName {
    Local,
    Keyed,
    Lookup,
    Opaque,
}

impl EffectName {
    fn name(self) -> &'static str {
        match self {
            EffectName::Local => "local",
            EffectName::Keyed => "keyed",
            EffectName::Lookup => "lookup",
            EffectName::Opaque => "opaque",
        }
    }
}

/// A stale-claim policy by its command-line name.
#[derive(Debug, Clone, Copy)]
struct StalePolicyName(StalePolicy);

impl<'de> Deserialize<'de> for StalePolicyName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse()
            .map(StalePolicyName)
            .map_err(|e: onceonly::Error| D::Error::custom(bare(&e)))
    }
}

/// A job type, checked like everywhere else.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct JobName(String);

impl<'de> Deserialize<'de> for JobName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        onceonly::validate_job_type(&s).map_err(|e| D::Error::custom(bare(&e)))?;
        Ok(JobName(s))
    }
}

/// A duration like `500ms`, `2s`, `5m`.
struct Dur(Duration);

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        onceonly::parse_duration(&s)
            .map(Dur)
            .map_err(|e| D::Error::custom(bare(&e)))
    }
}

/// A core error's sentence without its "invalid input: " prefix.
fn bare(e: &onceonly::Error) -> String {
    match e {
        onceonly::Error::Invalid(why) => why.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, String> {
        Config::parse(Path::new("onceonly.toml"), text)
    }

    #[test]
    fn every_setting() {
        let c = parse(
            r#"
[jobs.send_receipt]
effect = "opaque"
policy = "at-least-once"
lease = "30s"
timeout = "10s"
heartbeat = "5s"
destination = "http://127.0.0.1:9/"
redelivery_timeout = "5m"
lock_lifetime = "1m"
max_retries = 2
retention = "30d"

[jobs.charge]
effect = "keyed"
"#,
        )
        .unwrap();
        let s = c.job("send_receipt").unwrap();
        assert_eq!(s.effect, EffectKind::Opaque(StalePolicy::AtLeastOnce));
        let spec = s.spec();
        assert_eq!(spec.lease, Duration::from_secs(30));
        assert_eq!(spec.heartbeat, Some(Duration::from_secs(5)));
        assert_eq!(spec.redelivery_timeout, Some(Duration::from_secs(300)));
        assert_eq!(spec.lock_lifetime, Some(Duration::from_secs(60)));
        assert_eq!(spec.max_retries, 2);
        assert_eq!(s.destination.as_deref(), Some("http://127.0.0.1:9/"));
        assert_eq!(s.retention, Some(Duration::from_secs(30 * 24 * 3600)));
        assert_eq!(c.job("charge").unwrap().retention, None);
        let charge = c.job("charge").unwrap().spec();
        assert_eq!(charge, JobSpec::new("charge", EffectKind::Keyed));
        let err = c.job("nope").unwrap_err().to_string();
        assert!(err.contains("charge, send_receipt"), "{err}");
    }

    #[test]
    fn opaque_without_a_policy_holds() {
        let c = parse("[jobs.a]\neffect = \"opaque\"\n").unwrap();
        assert_eq!(c.jobs["a"].effect, EffectKind::Opaque(StalePolicy::Hold));
    }

    #[test]
    fn an_unknown_field_is_named_with_its_line() {
        let err = parse("[jobs.a]\neffect = \"keyed\"\nleese = \"30s\"\n").unwrap_err();
        assert!(err.starts_with("onceonly.toml:3:"), "{err}");
        assert!(err.contains("leese"), "{err}");
        assert!(err.contains("jobs.a"), "{err}");
    }

    #[test]
    fn bad_values_are_named_with_line_and_field() {
        let cases = [
            (
                "[jobs.a]\neffect = \"keyed\"\nlease = \"soon\"\n",
                3,
                "jobs.a.lease",
            ),
            ("[jobs.a]\neffect = \"email\"\n", 2, "jobs.a.effect"),
            (
                "[jobs.a]\neffect = \"keyed\"\n\npolicy = \"hold\"\n",
                4,
                "jobs.a.policy",
            ),
            (
                "[jobs.a]\neffect = \"opaque\"\npolicy = \"sometimes\"\n",
                3,
                "jobs.a.policy",
            ),
            (
                "[jobs.a]\neffect = \"keyed\"\nlease = 30\n",
                3,
                "jobs.a.lease",
            ),
            (
                "[jobs.a]\neffect = \"keyed\"\ndestination = \"ftp://x\"\n",
                3,
                "jobs.a.destination",
            ),
        ];
        for (text, line, field) in cases {
            let err = parse(text).unwrap_err();
            assert!(
                err.starts_with(&format!("onceonly.toml:{line}:")),
                "{text}: {err}"
            );
            assert!(err.contains(field), "{text}: {err}");
        }
    }

    #[test]
    fn missing_effect_and_bad_names_and_bad_toml() {
        let err = parse("[jobs.a]\nlease = \"1s\"\n").unwrap_err();
        assert!(err.contains("effect"), "{err}");
        let err = parse("[jobs.\"has space\"]\neffect = \"keyed\"\n").unwrap_err();
        assert!(err.starts_with("onceonly.toml:1:"), "{err}");
        assert!(err.contains("job type"), "{err}");
        let err = parse("[jobs.a\neffect = \"keyed\"\n").unwrap_err();
        assert!(err.starts_with("onceonly.toml:1:"), "{err}");
        assert!(err.contains("not valid TOML"), "{err}");
        let err = parse("[job.a]\neffect = \"keyed\"\n").unwrap_err();
        assert!(err.contains("unknown field `job`"), "{err}");
        // No serde internals in what the user reads.
        let err = parse("[jobs.a]\neffect = \"keyed\"\ndestination = 5\n").unwrap_err();
        assert!(
            err.contains("field jobs.a.destination: invalid type"),
            "{err}"
        );
        let err = parse("[jobs]\na = 5\n").unwrap_err();
        assert!(err.contains("expected a table of job settings"), "{err}");
        assert!(!err.contains("JobDe") && !err.contains("$__"), "{err}");
    }
}
