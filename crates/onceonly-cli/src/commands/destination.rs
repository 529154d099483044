//! The HTTP destination of `run` and `cancel`: the base URL, the job's
//! request shape from onceonly.toml (or the default shape), the flags that
//! adjust it, and the CA file; environment variables read once, here.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use onceonly::EffectKind;
use onceonly_http::{check_destination, ClientOptions, HttpDestination, Shape, ShapeSpec};

use super::config::JobSettings;

/// The flags of `run` and `cancel` that shape the destination.
#[derive(Debug, Default)]
pub struct Flags<'a> {
    /// `--ca-cert FILE`.
    pub ca_cert: Option<&'a PathBuf>,
    /// `--idempotency-header NAME|none`.
    pub idempotency_header: Option<&'a str>,
    /// `--header "NAME: VALUE"`, repeated.
    pub headers: &'a [String],
    /// `--max-answer-bytes N`.
    pub max_answer_bytes: Option<usize>,
}

/// The destination at `base` for `job`: the settings file's shape (or the
/// default), the flags over it, checked against `effect` when given.
pub fn build(
    job: &str,
    base: &str,
    file: Option<&JobSettings>,
    flags: &Flags<'_>,
    effect: Option<EffectKind>,
    request_timeout: Duration,
) -> anyhow::Result<HttpDestination> {
    let mut spec = file
        .and_then(|f| f.http.clone())
        .unwrap_or_else(ShapeSpec::test_protocol);
    if let Some(name) = flags.idempotency_header {
        spec.idempotency_header = Some(name.to_owned());
    }
    for header in flags.headers {
        let (name, value) = header.split_once(':').with_context(|| {
            format!(
                "--header {:?}: write it as \"NAME: VALUE\"",
                redacted_header(header)
            )
        })?;
        spec.headers
            .insert(name.trim().to_owned(), value.trim().to_owned());
    }
    if let Some(n) = flags.max_answer_bytes {
        spec.max_answer_bytes = Some(n);
    }
    let shape = Shape::resolve(&spec, |name| std::env::var(name).ok())
        .map_err(|e| anyhow::anyhow!("job {job}: destination: {e}"))?;
    // The rules `check` applies too, so a file it passes is one run starts with.
    check_destination(base, &shape, effect).map_err(|e| anyhow::anyhow!("job {job}: {e}"))?;
    let ca_cert = flags
        .ca_cert
        .cloned()
        .or_else(|| file.and_then(|f| f.ca_cert.clone()));
    let options = ClientOptions {
        request_timeout,
        ca_cert,
    };
    Ok(HttpDestination::with_shape(base, shape, &options)?)
}

/// A header flag as it may be shown: its name only (the value may be a
/// credential typed on the command line).
fn redacted_header(header: &str) -> String {
    match header.split_once(' ') {
        Some((name, _)) => format!("{name} …"),
        None => "…".to_owned(),
    }
}
