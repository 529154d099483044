//! A destination's request shape: how a send, a lookup and a withdraw are
//! asked for, and what each answer means. [`Shape::default`] is the test
//! protocol of docs/DESIGN.md section 6 (`POST BASE/items` with
//! `Idempotency-Key`, `{"id": ...}` back); a [`ShapeSpec`] from
//! `onceonly.toml` describes any other, each field not given taking the
//! default's value (except `lookup` and `withdraw`, which a spec has only
//! when it gives them).

mod reference;
mod secrets;
mod spec;
mod statuses;

use std::collections::BTreeMap;

use onceonly::{EffectOutcome, LookupOutcome, WithdrawOutcome};
use reqwest::header::{HeaderMap, HeaderName};
use reqwest::{Method, StatusCode};

use crate::answer::Answer;
use crate::template::{Template, Var};
pub use reference::Reference;
pub use secrets::{Secrets, Signing};
pub use spec::{LookupSpec, ShapeSpec, SignSpec, StatusSpec, WithdrawSpec};
use statuses::{Class, Statuses};

/// The body of a send.
#[derive(Debug, Clone)]
pub enum Body {
    /// The payload as is (nothing for a null payload).
    Payload,
    /// A JSON value whose strings are templates.
    Template(serde_json::Value),
}

/// One request: method, URL template, its own headers.
#[derive(Debug, Clone)]
pub struct RequestShape {
    /// The method.
    pub method: Method,
    /// The URL template.
    pub url: Template,
    /// Headers of this request only.
    pub headers: Vec<(HeaderName, Template)>,
}

/// The lookup request and the meaning of its answers.
#[derive(Debug, Clone)]
pub struct LookupShape {
    /// The request.
    pub request: RequestShape,
    found: Statuses,
    not_found: Statuses,
    reference: Reference,
    empty_means_not_found: bool,
}

/// The withdraw request and the statuses that mean gone.
#[derive(Debug, Clone)]
pub struct WithdrawShape {
    /// The request.
    pub request: RequestShape,
    gone: Statuses,
}

/// A resolved shape, ready to build requests and read answers.
#[derive(Debug, Clone)]
pub struct Shape {
    /// The send request.
    pub send: RequestShape,
    /// Headers on every request.
    pub headers: Vec<(HeaderName, Template)>,
    /// The header carrying `JOB:KEY` on a send, if any.
    pub idempotency_header: Option<HeaderName>,
    /// The send's body.
    pub body: Body,
    /// The send's Content-Type.
    pub content_type: String,
    reference: Reference,
    done: Statuses,
    not_sent: Statuses,
    unknown: Statuses,
    permanent: Statuses,
    /// The lookup, if the destination has one.
    pub lookup: Option<LookupShape>,
    /// The withdraw, if the destination has one.
    pub withdraw: Option<WithdrawShape>,
    /// Body signing, if asked for.
    pub signing: Option<Signing>,
    /// The environment variables read at start.
    pub secrets: Secrets,
    /// A credential may go over plain http:// to any host.
    pub allow_insecure_credentials: bool,
    /// The longest answer body read; a longer one is cut (crate::answer).
    pub max_answer_bytes: usize,
    /// Origins besides the destination's own that a URL built from an
    /// answer (`{ref}`) may point at, such as `https://files.example.com`.
    pub allowed_origins: Vec<url::Origin>,
}

const DEFAULT_SEND_URL: &str = "{base}/items";
const DEFAULT_LOOKUP_URL: &str = "{base}/items?idempotency_key={idempotency_key}";
const DEFAULT_WITHDRAW_URL: &str = "{base}/items/{ref}";
const DEFAULT_IDEMPOTENCY_HEADER: &str = "Idempotency-Key";

impl Default for Shape {
    /// The test protocol of docs/DESIGN.md section 6.
    fn default() -> Self {
        Self::resolve(&ShapeSpec::test_protocol(), |_| None).expect("the default shape is valid")
    }
}

fn method(text: Option<&str>, default: Method, field: &str) -> Result<Method, String> {
    match text {
        None => Ok(default),
        Some(m) => Method::from_bytes(m.trim().to_ascii_uppercase().as_bytes())
            .map_err(|_| format!("{field}: {m:?} is not an HTTP method")),
    }
}

fn template(text: &str, field: &str) -> Result<Template, String> {
    Template::parse(text).map_err(|e| format!("{field}: {e}"))
}

fn url_template(text: &str, field: &str) -> Result<Template, String> {
    let t = template(text, field)?;
    let fixed_host = t
        .leading_text()
        .is_some_and(|s| s.starts_with("http://") || s.starts_with("https://"));
    // A whole URL from the environment (a webhook URL is its own secret).
    let from_var = matches!(t.leading_var(), Some(Var::Base | Var::Ref | Var::Env(_)));
    if !(fixed_host || from_var) {
        return Err(format!(
            "{field}: {text:?} must start with {{base}}, {{ref}}, {{env.NAME}} or http(s)://"
        ));
    }
    Ok(t)
}

fn max_answer_bytes(given: Option<usize>) -> Result<usize, String> {
    match given {
        None => Ok(crate::answer::DEFAULT_MAX_ANSWER_BYTES),
        Some(0) => Err(
            "max_answer_bytes: 0 would cut every answer; give a size in bytes such as 65536".into(),
        ),
        Some(n) => Ok(n),
    }
}

fn allowed_origins(given: &[String]) -> Result<Vec<url::Origin>, String> {
    given
        .iter()
        .map(|text| {
            let url = url::Url::parse(text)
                .map_err(|e| format!("allowed_origins: {text:?} is not a URL: {e}"))?;
            if !matches!(url.scheme(), "http" | "https")
                || url.path() != "/"
                || url.query().is_some()
            {
                return Err(format!(
                    "allowed_origins: {text:?} is not an origin: give scheme, host and port only, \
                     such as \"https://files.example.com\""
                ));
            }
            Ok(url.origin())
        })
        .collect()
}

fn headers(
    map: &BTreeMap<String, String>,
    field: &str,
) -> Result<Vec<(HeaderName, Template)>, String> {
    map.iter()
        .map(|(name, value)| {
            let header = HeaderName::try_from(name.as_str())
                .map_err(|_| format!("{field}: {name:?} is not a header name"))?;
            Ok((header, template(value, &format!("{field}.{name}"))?))
        })
        .collect()
}

impl Shape {
    /// Resolves a spec, reading every environment variable it names through
    /// `env`. A missing variable is an error naming it.
    pub fn resolve(spec: &ShapeSpec, env: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        let send = RequestShape {
            method: method(spec.method.as_deref(), Method::POST, "method")?,
            url: url_template(spec.url.as_deref().unwrap_or(DEFAULT_SEND_URL), "url")?,
            headers: Vec::new(),
        };
        let idempotency_header = match spec.idempotency_header.as_deref() {
            Some("none") => None,
            name => {
                let name = name.unwrap_or(DEFAULT_IDEMPOTENCY_HEADER);
                Some(HeaderName::try_from(name).map_err(|_| {
                    format!("idempotency_header: {name:?} is not a header name (or \"none\")")
                })?)
            }
        };
        let body = match &spec.body {
            None => Body::Payload,
            Some(value) => {
                check_body_templates(value)?;
                Body::Template(value.clone())
            }
        };
        let reference = Reference::parse(spec.reference.as_deref().unwrap_or("/id"), "reference")?;
        let lookup = spec
            .lookup
            .as_ref()
            .map(|l| -> Result<LookupShape, String> {
                Ok(LookupShape {
                    request: RequestShape {
                        method: method(l.method.as_deref(), Method::GET, "lookup.method")?,
                        url: url_template(&l.url, "lookup.url")?,
                        headers: headers(&l.headers, "lookup.headers")?,
                    },
                    found: Statuses::parse(&l.found, "lookup.found")?.or(&[(200, 200)]),
                    not_found: Statuses::parse(&l.not_found, "lookup.not_found")?.or(&[(404, 404)]),
                    reference: match &l.reference {
                        Some(r) => Reference::parse(r, "lookup.reference")?,
                        None => reference.clone(),
                    },
                    empty_means_not_found: l.empty_means_not_found,
                })
            })
            .transpose()?;
        if lookup
            .as_ref()
            .is_some_and(|l| l.reference == Reference::None)
        {
            return Err(
                "lookup.reference: a lookup needs the reference of the item it finds".into(),
            );
        }
        let withdraw = spec
            .withdraw
            .as_ref()
            .map(|w| -> Result<WithdrawShape, String> {
                Ok(WithdrawShape {
                    request: RequestShape {
                        method: method(w.method.as_deref(), Method::DELETE, "withdraw.method")?,
                        url: url_template(&w.url, "withdraw.url")?,
                        headers: headers(&w.headers, "withdraw.headers")?,
                    },
                    gone: Statuses::parse(&w.gone, "withdraw.gone")?.or(&[(200, 299), (404, 404)]),
                })
            })
            .transpose()?;
        let mut shape = Self {
            send,
            headers: headers(&spec.headers, "headers")?,
            idempotency_header,
            body,
            content_type: spec
                .content_type
                .clone()
                .unwrap_or_else(|| "application/json".to_owned()),
            reference,
            done: Statuses::parse(&spec.done, "done")?,
            not_sent: Statuses::parse(&spec.not_sent, "not_sent")?,
            unknown: Statuses::parse(&spec.unknown, "unknown")?,
            permanent: Statuses::parse(&spec.permanent, "permanent")?,
            lookup,
            withdraw,
            signing: None,
            secrets: Secrets::default(),
            allow_insecure_credentials: spec.allow_insecure_credentials,
            max_answer_bytes: max_answer_bytes(spec.max_answer_bytes)?,
            allowed_origins: allowed_origins(&spec.allowed_origins)?,
        };
        let mut names: Vec<String> = shape.env_names();
        if let Some(sign) = &spec.sign {
            names.push(sign.secret_env.clone());
        }
        names.sort();
        names.dedup();
        let missing: Vec<&str> = names
            .iter()
            .filter(|n| env(n).is_none())
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "environment variable{} {} not set (the destination's shape reads {})",
                if missing.len() > 1 { "s" } else { "" },
                missing.join(", "),
                if missing.len() > 1 { "them" } else { "it" }
            ));
        }
        shape.secrets = Secrets(
            names
                .iter()
                .map(|n| (n.clone(), env(n).unwrap_or_default()))
                .collect(),
        );
        if let Some(sign) = &spec.sign {
            shape.signing = Some(Signing {
                header: HeaderName::try_from(sign.header.as_str())
                    .map_err(|_| format!("sign.header: {:?} is not a header name", sign.header))?,
                prefix: sign.prefix.clone(),
                secret: shape.secrets.0[&sign.secret_env].clone(),
            });
        }
        Ok(shape)
    }

    /// Every template of the shape's requests and headers.
    fn templates(&self) -> impl Iterator<Item = &Template> {
        let requests = [
            Some(&self.send),
            self.lookup.as_ref().map(|l| &l.request),
            self.withdraw.as_ref().map(|w| &w.request),
        ];
        requests
            .into_iter()
            .flatten()
            .flat_map(|r| std::iter::once(&r.url).chain(r.headers.iter().map(|(_, t)| t)))
            .chain(self.headers.iter().map(|(_, t)| t))
    }

    fn env_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .templates()
            .flat_map(Template::vars)
            .filter_map(|v| match v {
                Var::Env(n) => Some(n.clone()),
                _ => None,
            })
            .collect();
        if let Body::Template(body) = &self.body {
            collect_body_env(body, &mut names);
        }
        names
    }

    /// The requests carry a credential: a URL or a header takes a value
    /// from the environment.
    pub fn sends_credentials(&self) -> bool {
        self.templates()
            .flat_map(Template::vars)
            .any(|v| matches!(v, Var::Env(_)))
    }

    /// Refuses a credential over plain http:// to a host other than
    /// loopback, unless allowed.
    pub fn check_transport(&self, url: &reqwest::Url) -> Result<(), String> {
        if url.scheme() != "http" || self.allow_insecure_credentials || !self.sends_credentials() {
            return Ok(());
        }
        let loopback = match url.host() {
            Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
            Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
            Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
            None => false,
        };
        if loopback {
            return Ok(());
        }
        Err(format!(
            "a credential would travel over plain http:// to {}: use https://, or set \
             allow_insecure_credentials = true if the network is trusted",
            url.host_str().unwrap_or("?")
        ))
    }

    /// The destination dedups on a header (a keyed effect is possible).
    pub fn sends_idempotency_key(&self) -> bool {
        self.idempotency_header.is_some()
    }

    /// The effect kind fits the shape: keyed needs an idempotency header,
    /// lookup needs a lookup request.
    pub fn check_effect(&self, kind: onceonly::EffectKind) -> Result<(), String> {
        match kind {
            onceonly::EffectKind::Keyed if self.idempotency_header.is_none() => Err(
                "idempotency_header = \"none\": the destination cannot dedup, so the effect \
                 cannot be keyed; use effect = \"lookup\" (with a [lookup] request) or \
                 \"opaque\" (with a policy)"
                    .to_owned(),
            ),
            onceonly::EffectKind::Lookup if self.lookup.is_none() => Err(
                "effect \"lookup\" needs a lookup request in the destination's shape \
                 (lookup = { url = ... })"
                    .to_owned(),
            ),
            _ => Ok(()),
        }
    }

    /// What a send's answer means (docs/DESIGN.md section 6, with this
    /// shape's statuses first).
    pub fn classify_send(
        &self,
        status: StatusCode,
        headers: &HeaderMap,
        body: &[u8],
        url: Option<&reqwest::Url>,
    ) -> EffectOutcome {
        let code = status.as_u16();
        match self.class_of(code) {
            Class::Done => match self.reference.find(headers, body, url) {
                Some(r) => match onceonly::answer::check_reference(&r) {
                    Ok(()) => EffectOutcome::Done {
                        external_ref: Some(r.clone()),
                        result: serde_json::json!({ "id": r }),
                    },
                    Err(e) => EffectOutcome::Failed(format!("destination answered {code}: {e}")),
                },
                None if self.reference == Reference::None => EffectOutcome::Done {
                    external_ref: None,
                    result: serde_json::json!({ "status": code }),
                },
                None => EffectOutcome::Failed(format!(
                    "destination answered {code} without {}: it breaks the protocol (body: {})",
                    self.reference.describe(),
                    snippet(body)
                )),
            },
            Class::NotSent => EffectOutcome::NotSent(format!(
                "destination answered {code}, which this destination's shape calls not sent: {}",
                snippet(body)
            )),
            Class::Unknown => {
                EffectOutcome::Unknown(format!("destination answered {code}: {}", snippet(body)))
            }
            Class::Permanent if (400..=499).contains(&code) => EffectOutcome::Failed(format!(
                "destination refused with {code}: {}",
                snippet(body)
            )),
            Class::Permanent => EffectOutcome::Failed(format!(
                "destination answered {code}, which the protocol does not allow"
            )),
        }
    }

    /// What a send's answer means when it was read up to
    /// `max_answer_bytes` (crate::answer): a done status whose reference is
    /// in a body that was cut is unknown (it may be done, but its reference
    /// cannot be read); every other class keeps its meaning, its message
    /// naming the limit.
    pub fn classify_send_answer(
        &self,
        status: StatusCode,
        headers: &HeaderMap,
        answer: &Answer,
        url: Option<&reqwest::Url>,
    ) -> EffectOutcome {
        let code = status.as_u16();
        if let Some(limit) = answer.cut_at {
            if self.class_of(code) == Class::Done && self.reference.in_body() {
                return EffectOutcome::Unknown(format!(
                    "destination answered {code} with an answer longer than max_answer_bytes = \
                     {limit}: the reference in it cannot be read, so whether it is done is unknown"
                ));
            }
        }
        let note = answer.cut_note();
        match self.classify_send(status, headers, &answer.body, url) {
            EffectOutcome::NotSent(why) => EffectOutcome::NotSent(why + &note),
            EffectOutcome::Unknown(why) => EffectOutcome::Unknown(why + &note),
            EffectOutcome::Failed(why) => EffectOutcome::Failed(why + &note),
            done => done,
        }
    }

    /// What a lookup's answer read up to `max_answer_bytes` means: a found
    /// status whose reference is in a cut body cannot answer (try later).
    pub fn classify_lookup_answer(
        &self,
        lookup: &LookupShape,
        status: StatusCode,
        headers: &HeaderMap,
        answer: &Answer,
        url: Option<&reqwest::Url>,
    ) -> LookupOutcome {
        let code = status.as_u16();
        if let Some(limit) = answer.cut_at {
            if lookup.found.contains(code) && lookup.reference.in_body() {
                return LookupOutcome::Unavailable(format!(
                    "lookup answered {code} with an answer longer than max_answer_bytes = {limit}: \
                     the reference in it cannot be read"
                ));
            }
        }
        match self.classify_lookup(lookup, status, headers, &answer.body, url) {
            LookupOutcome::Unavailable(why) => LookupOutcome::Unavailable(why + &answer.cut_note()),
            other => other,
        }
    }

    fn class_of(&self, code: u16) -> Class {
        if self.done.contains(code) {
            Class::Done
        } else if self.not_sent.contains(code) {
            Class::NotSent
        } else if self.unknown.contains(code) {
            Class::Unknown
        } else if self.permanent.contains(code) {
            Class::Permanent
        } else {
            match code {
                200..=299 => Class::Done,
                408 | 409 | 429 | 500..=599 => Class::Unknown,
                _ => Class::Permanent,
            }
        }
    }

    /// What a lookup's answer means.
    pub fn classify_lookup(
        &self,
        lookup: &LookupShape,
        status: StatusCode,
        headers: &HeaderMap,
        body: &[u8],
        url: Option<&reqwest::Url>,
    ) -> LookupOutcome {
        let code = status.as_u16();
        if lookup.found.contains(code) {
            return match lookup.reference.find(headers, body, url) {
                Some(r) => match onceonly::answer::check_reference(&r) {
                    Ok(()) => LookupOutcome::Found {
                        external_ref: Some(r.clone()),
                        result: serde_json::json!({ "id": r }),
                    },
                    Err(e) => LookupOutcome::Unavailable(format!("lookup answered {code}: {e}")),
                },
                None if lookup.empty_means_not_found => LookupOutcome::NotFound,
                None => LookupOutcome::Unavailable(format!(
                    "lookup answered {code} without {}: {}",
                    lookup.reference.describe(),
                    snippet(body)
                )),
            };
        }
        if lookup.not_found.contains(code) {
            return LookupOutcome::NotFound;
        }
        LookupOutcome::Unavailable(format!("lookup answered {code}: {}", snippet(body)))
    }

    /// What a withdraw's answer means.
    pub fn classify_withdraw(
        withdraw: &WithdrawShape,
        status: StatusCode,
        reference: &str,
    ) -> WithdrawOutcome {
        if withdraw.gone.contains(status.as_u16()) {
            WithdrawOutcome::Withdrawn
        } else {
            WithdrawOutcome::NotWithdrawn(format!(
                "withdraw of item {reference} answered {status}: the item may still be there"
            ))
        }
    }
}

fn check_body_templates(value: &serde_json::Value) -> Result<(), String> {
    match value {
        serde_json::Value::String(s) => template(s, "body").map(drop),
        serde_json::Value::Array(items) => items.iter().try_for_each(check_body_templates),
        serde_json::Value::Object(map) => map.values().try_for_each(check_body_templates),
        _ => Ok(()),
    }
}

fn collect_body_env(value: &serde_json::Value, names: &mut Vec<String>) {
    match value {
        serde_json::Value::String(s) => {
            if let Ok(t) = Template::parse(s) {
                names.extend(t.vars().filter_map(|v| match v {
                    Var::Env(n) => Some(n.clone()),
                    _ => None,
                }));
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| collect_body_env(v, names)),
        serde_json::Value::Object(map) => map.values().for_each(|v| collect_body_env(v, names)),
        _ => {}
    }
}

/// The first 200 characters of an answer, for a message, control
/// characters escaped.
pub fn snippet(body: &[u8]) -> String {
    let lossy = String::from_utf8_lossy(body);
    let text = onceonly::escape_controls(&lossy);
    let mut s: String = text.chars().take(200).collect();
    if text.chars().count() > 200 {
        s.push('…');
    }
    s
}
