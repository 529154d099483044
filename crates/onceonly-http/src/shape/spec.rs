//! A shape as written in `onceonly.toml`: every field optional, checked
//! and resolved by [`super::Shape::resolve`].

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{DEFAULT_LOOKUP_URL, DEFAULT_WITHDRAW_URL};

/// A shape as written in `onceonly.toml` (`[jobs.NAME.http]`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShapeSpec {
    /// The send's method [default: POST].
    pub method: Option<String>,
    /// The send's URL template [default: `{base}/items`].
    pub url: Option<String>,
    /// Headers on every request (send, lookup, withdraw); values are templates.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// The header carrying `JOB:KEY` on a send, or `"none"` [default: Idempotency-Key].
    pub idempotency_header: Option<String>,
    /// The send's body: absent = the payload as is; else a JSON/TOML value
    /// whose strings are templates (a string that is one placeholder keeps
    /// the value's type).
    pub body: Option<serde_json::Value>,
    /// The send's Content-Type [default: application/json].
    pub content_type: Option<String>,
    /// Where the created item's reference is: a JSON pointer (`/id`),
    /// `header:NAME` (such as `header:Location`), or `none` [default: /id].
    pub reference: Option<String>,
    /// Statuses that mean done (checked before the defaults).
    #[serde(default)]
    pub done: Vec<StatusSpec>,
    /// Statuses that mean surely not sent (safe to retry).
    #[serde(default)]
    pub not_sent: Vec<StatusSpec>,
    /// Statuses that mean it may have happened.
    #[serde(default)]
    pub unknown: Vec<StatusSpec>,
    /// Statuses that mean failed for good.
    #[serde(default)]
    pub permanent: Vec<StatusSpec>,
    /// How to ask whether an item exists for the operation.
    pub lookup: Option<LookupSpec>,
    /// How to withdraw an item (cancel, compensation).
    pub withdraw: Option<WithdrawSpec>,
    /// Sign each send's body with HMAC-SHA256.
    pub sign: Option<SignSpec>,
    /// Allow a credential over plain http:// to a host other than loopback.
    #[serde(default)]
    pub allow_insecure_credentials: bool,
    /// The longest answer body read, in bytes [default: 65536]; a longer
    /// one is cut (a done answer whose reference is in it is then unknown).
    pub max_answer_bytes: Option<usize>,
    /// Origins (`https://host:port`) besides the destination's own that a
    /// lookup or withdraw URL built from an answer (`{ref}`) may point at.
    #[serde(default)]
    pub allowed_origins: Vec<String>,
}

/// The lookup request and what "found" looks like.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LookupSpec {
    /// [default: GET]
    pub method: Option<String>,
    /// URL template, such as `{base}/items?idempotency_key={idempotency_key}`.
    pub url: String,
    /// Headers of this request only.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Statuses that mean found when the reference is there [default: 200].
    #[serde(default)]
    pub found: Vec<StatusSpec>,
    /// Statuses that mean surely not there [default: 404].
    #[serde(default)]
    pub not_found: Vec<StatusSpec>,
    /// Where the reference is in a found answer [default: the send's].
    pub reference: Option<String>,
    /// A found status without the reference means not found (a search that
    /// answers 200 with an empty list) instead of "try again later".
    #[serde(default)]
    pub empty_means_not_found: bool,
}

/// The withdraw request.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WithdrawSpec {
    /// [default: DELETE]
    pub method: Option<String>,
    /// URL template, such as `{base}/items/{ref}`.
    pub url: String,
    /// Headers of this request only.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Statuses that mean gone [default: 2xx and 404].
    #[serde(default)]
    pub gone: Vec<StatusSpec>,
}

/// Request signing, as webhook senders do.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignSpec {
    /// The header carrying the signature, such as `X-Signature`.
    pub header: String,
    /// The environment variable holding the secret.
    pub secret_env: String,
    /// Text before the hex digest, such as `sha256=`.
    #[serde(default)]
    pub prefix: String,
}

/// A status (`404`), a class (`"5xx"`) or a range (`"500-503"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatusSpec {
    /// One status.
    Code(u16),
    /// A class or a range.
    Text(String),
}

impl<'de> Deserialize<'de> for StatusSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = StatusSpec;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a status (404), a class (\"4xx\") or a range (\"500-503\")")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<StatusSpec, E> {
                u16::try_from(v)
                    .map(StatusSpec::Code)
                    .map_err(|_| E::custom(format!("{v} is not an HTTP status")))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<StatusSpec, E> {
                u16::try_from(v)
                    .map(StatusSpec::Code)
                    .map_err(|_| E::custom(format!("{v} is not an HTTP status")))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<StatusSpec, E> {
                Ok(StatusSpec::Text(v.to_owned()))
            }
        }
        d.deserialize_any(Visitor)
    }
}

impl ShapeSpec {
    /// The test protocol of docs/DESIGN.md section 6, lookup and withdraw
    /// included: what a job without an `http` table gets.
    pub fn test_protocol() -> Self {
        Self {
            lookup: Some(LookupSpec {
                method: None,
                url: DEFAULT_LOOKUP_URL.to_owned(),
                headers: BTreeMap::new(),
                found: Vec::new(),
                not_found: Vec::new(),
                reference: None,
                empty_means_not_found: false,
            }),
            withdraw: Some(WithdrawSpec {
                method: None,
                url: DEFAULT_WITHDRAW_URL.to_owned(),
                headers: BTreeMap::new(),
                gone: Vec::new(),
            }),
            ..Self::default()
        }
    }
}
