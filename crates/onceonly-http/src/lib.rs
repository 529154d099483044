//! The HTTP destination of docs/DESIGN.md section 6, as an onceonly [`Effect`],
//! over http:// or https:// (rustls; the system's roots plus `--ca-cert`).
//!
//! What each request looks like is the destination's [`Shape`]. The
//! default shape is the test protocol:
//!
//! - send: `POST BASE/items` with header `Idempotency-Key: JOB:KEY` and the
//!   payload as body; 2xx with `{"id": ...}` is done.
//! - lookup: `GET BASE/items?idempotency_key=JOB:KEY`: 200 found, 404 not found.
//! - withdraw: `DELETE BASE/items/ID`: 2xx or 404 gone.
//!
//! A [`ShapeSpec`] (from `onceonly.toml`) describes any other: method and
//! URL templates, headers from the environment, the idempotency header or
//! none, the body, where the reference is, which statuses mean what, the
//! lookup and the withdraw, HMAC signing. Every response class maps to
//! done, not sent, unknown or permanent failure, as [`Shape::classify_send`]
//! documents; values read from the environment are secrets, blanked out of
//! every message.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use onceonly::{Effect, EffectCtx, EffectOutcome, LookupOutcome, WithdrawOutcome};
use reqwest::header::{HeaderMap, HeaderValue, CONTENT_TYPE};
use reqwest::StatusCode;

pub mod answer;
pub mod check;
pub mod client;
pub mod shape;
pub mod template;
#[cfg(feature = "test-server")]
pub mod test_ca;
#[cfg(feature = "test-server")]
pub mod test_server;
#[cfg(feature = "test-server")]
pub mod tls_listener;

pub use check::check_destination;
pub use client::build_client;
pub use shape::{Shape, ShapeSpec};

use shape::{Body, RequestShape};
use template::{Template, Values};

/// How the destination's client is built.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Each request's bound.
    pub request_timeout: Duration,
    /// A PEM file of certificate authorities trusted next to the system's.
    pub ca_cert: Option<PathBuf>,
}

/// The effect that sends a job's payload to an HTTP destination.
#[derive(Debug, Clone)]
pub struct HttpDestination {
    client: reqwest::Client,
    /// Each request's bound, named when it cuts one.
    request_timeout: Duration,
    base: String,
    /// The origin (scheme, host, port) the destination's credentials belong to.
    origin: url::Origin,
    shape: Arc<Shape>,
}

/// Why a request could not be built; nothing was sent.
struct Unbuilt(String);

impl HttpDestination {
    /// The default shape at `base_url` (no trailing `/items`), each request
    /// bounded by `request_timeout`, trusting the system's roots.
    pub fn new(base_url: &str, request_timeout: Duration) -> onceonly::Result<Self> {
        let options = ClientOptions {
            request_timeout,
            ca_cert: None,
        };
        Self::with_shape(base_url, Shape::default(), &options)
    }

    /// `shape` at `base_url`.
    pub fn with_shape(
        base_url: &str,
        shape: Shape,
        options: &ClientOptions,
    ) -> onceonly::Result<Self> {
        let parsed = check_destination(base_url, &shape, None).map_err(onceonly::Error::Invalid)?;
        let client = build_client(options.request_timeout, options.ca_cert.as_deref())?;
        Ok(Self {
            client,
            request_timeout: options.request_timeout,
            base: base_url.trim_end_matches('/').to_owned(),
            origin: parsed.origin(),
            shape: Arc::new(shape),
        })
    }

    /// The base URL.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// The destination's shape.
    pub fn shape(&self) -> &Shape {
        &self.shape
    }

    /// A request of `shape`, with the headers every request carries.
    fn request(
        &self,
        request: &RequestShape,
        ctx: &EffectCtx,
        reference: Option<&str>,
    ) -> Result<(reqwest::RequestBuilder, reqwest::Url), Unbuilt> {
        let values = Values {
            base: &self.base,
            ctx,
            reference,
            env: self.shape.secrets.values(),
        };
        let text = request.url.render_url(&values).map_err(Unbuilt)?;
        let url = reqwest::Url::parse(&text)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https"))
            .ok_or_else(|| Unbuilt(format!("{text} is not an http(s) URL")))?;
        self.shape.check_transport(&url).map_err(Unbuilt)?;
        if request.url.vars().any(|v| *v == template::Var::Ref) {
            self.check_origin(&url)?;
        }
        let mut builder = self.client.request(request.method.clone(), url.clone());
        for (name, template) in self.shape.headers.iter().chain(&request.headers) {
            let value = header_value(template, &values)
                .map_err(|e| Unbuilt(format!("header {name}: {e}")))?;
            builder = builder.header(name, value);
        }
        Ok((builder, url))
    }

    /// A URL built from an answer goes only to the destination's origin or
    /// one its settings allow: the destination's credentials go with it.
    fn check_origin(&self, url: &reqwest::Url) -> Result<(), Unbuilt> {
        let origin = url.origin();
        if origin == self.origin || self.shape.allowed_origins.contains(&origin) {
            return Ok(());
        }
        Err(Unbuilt(format!(
            "the URL built from the destination's answer points at {}, not at the \
             destination's origin {}: refused, so its credentials stay there (list the \
             origin in allowed_origins if it is the destination's own)",
            origin.ascii_serialization(),
            self.origin.ascii_serialization()
        )))
    }

    async fn send(&self, ctx: &EffectCtx) -> EffectOutcome {
        let shape = &*self.shape;
        let built = self
            .request(&shape.send, ctx, None)
            .and_then(|(builder, url)| {
                let body = self.body(ctx).map_err(Unbuilt)?;
                let mut builder = builder.header(CONTENT_TYPE, &shape.content_type);
                if let Some(name) = &shape.idempotency_header {
                    builder = builder.header(name, &ctx.idempotency_key);
                }
                if let Some(signing) = &shape.signing {
                    builder = builder.header(&signing.header, signing.sign(&body));
                }
                Ok((builder.body(body), url))
            });
        let (builder, url) = match built {
            Ok(b) => b,
            Err(Unbuilt(why)) => {
                return EffectOutcome::Failed(format!(
                    "the request could not be built, nothing was sent: {why}"
                ))
            }
        };
        let response = match builder.send().await {
            Ok(r) => r,
            Err(e) if e.is_timeout() => return self.request_timed_out(&e),
            Err(e) => return classify_send_error(&e),
        };
        let status = response.status();
        let headers = response.headers().clone();
        match answer::read_bounded(response, shape.max_answer_bytes).await {
            Ok(answer) => shape.classify_send_answer(status, &headers, &answer, Some(&url)),
            Err((e, _)) if status.is_success() => EffectOutcome::Unknown(format!(
                "destination answered {status} but the body was lost: {e}"
            )),
            Err((_, read)) => shape.classify_send(status, &headers, &read, Some(&url)),
        }
    }

    /// A send cut by the request's own bound (not the attempt's: that one
    /// drops the effect and says so itself).
    fn request_timed_out(&self, e: &reqwest::Error) -> EffectOutcome {
        EffectOutcome::Unknown(format!(
            "timed out after sending: the request timeout ({}) ran out: {}",
            humantime::format_duration(self.request_timeout),
            client::error_chain(e)
        ))
    }

    /// The send's body: the payload as is, or the shape's template filled.
    fn body(&self, ctx: &EffectCtx) -> Result<Vec<u8>, String> {
        match &self.shape.body {
            Body::Payload => Ok(payload_body(ctx)),
            Body::Template(template) => {
                let values = Values {
                    base: &self.base,
                    ctx,
                    reference: None,
                    env: self.shape.secrets.values(),
                };
                Ok(fill_json(template, &values)?.to_string().into_bytes())
            }
        }
    }

    async fn look(&self, ctx: &EffectCtx) -> LookupOutcome {
        let Some(lookup) = &self.shape.lookup else {
            return LookupOutcome::Unavailable(
                "this destination's shape has no lookup request".to_owned(),
            );
        };
        let (builder, url) = match self.request(&lookup.request, ctx, None) {
            Ok(b) => b,
            Err(Unbuilt(why)) => {
                return LookupOutcome::Unavailable(format!("the lookup could not be built: {why}"))
            }
        };
        let response = match builder.send().await {
            Ok(r) => r,
            Err(e) => {
                return LookupOutcome::Unavailable(format!(
                    "lookup failed: {}",
                    client::error_chain(&e)
                ))
            }
        };
        let status = response.status();
        let headers = response.headers().clone();
        let answer = answer::read_bounded(response, self.shape.max_answer_bytes)
            .await
            .unwrap_or_else(|(_, body)| answer::Answer { body, cut_at: None });
        self.shape
            .classify_lookup_answer(lookup, status, &headers, &answer, Some(&url))
    }

    async fn remove(&self, ctx: &EffectCtx, external_ref: &str) -> WithdrawOutcome {
        let Some(withdraw) = &self.shape.withdraw else {
            return WithdrawOutcome::NotWithdrawn(format!(
                "this destination's shape has no withdraw request: item {external_ref} may still be there"
            ));
        };
        let builder = match self.request(&withdraw.request, ctx, Some(external_ref)) {
            Ok((b, _)) => b,
            Err(Unbuilt(why)) => {
                return WithdrawOutcome::NotWithdrawn(format!(
                    "the withdraw of item {external_ref} could not be built ({why}); the item may still be there"
                ))
            }
        };
        match builder.send().await {
            Ok(r) => Shape::classify_withdraw(withdraw, r.status(), external_ref),
            Err(e) => WithdrawOutcome::NotWithdrawn(format!(
                "withdraw of item {external_ref} failed: {}; the item may still be there",
                client::error_chain(&e)
            )),
        }
    }
}

/// A header's value; one holding a secret is marked sensitive (kept out of
/// reqwest's and hyper's debug output).
fn header_value(template: &Template, values: &Values<'_>) -> Result<HeaderValue, String> {
    let secret = template.vars().any(|v| matches!(v, template::Var::Env(_)));
    let text = template.render_text(values)?;
    let mut value = HeaderValue::from_str(&text)
        .map_err(|_| "the value holds a character a header cannot carry".to_owned())?;
    value.set_sensitive(secret);
    Ok(value)
}

/// A body template filled: a string that is one placeholder takes the
/// value with its JSON type; other strings are filled as text.
fn fill_json(
    template: &serde_json::Value,
    values: &Values<'_>,
) -> Result<serde_json::Value, String> {
    use serde_json::Value;
    Ok(match template {
        Value::String(s) => {
            let t = Template::parse(s)?;
            match t.single_var() {
                Some(var) => template::value_of(var, values)?,
                None => Value::String(t.render_text(values)?),
            }
        }
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|v| fill_json(v, values))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| Ok((k.clone(), fill_json(v, values)?)))
                .collect::<Result<_, String>>()?,
        ),
        other => other.clone(),
    })
}

/// What a send's transport error means: a request that could not be built,
/// or a connection that failed before any byte was written (refused, or a
/// TLS handshake that failed: the request is written only after it), is not
/// sent; anything later may have reached the destination.
pub fn classify_send_error(e: &reqwest::Error) -> EffectOutcome {
    let detail = client::error_chain(e);
    if e.is_builder() {
        EffectOutcome::NotSent(format!(
            "the request could not be built, nothing was sent: {detail}"
        ))
    } else if e.is_connect() {
        EffectOutcome::NotSent(format!("connection failed before sending: {detail}"))
    } else if e.is_timeout() {
        EffectOutcome::Unknown(format!("timed out after sending: {detail}"))
    } else {
        EffectOutcome::Unknown(format!("transport error after sending: {detail}"))
    }
}

/// What a send's response means under the default shape (docs/DESIGN.md
/// section 6); [`Shape::classify_send`] for any shape.
pub fn classify_send(status: StatusCode, body: &[u8]) -> EffectOutcome {
    static DEFAULT: LazyLock<Shape> = LazyLock::new(Shape::default);
    DEFAULT.classify_send(status, &HeaderMap::new(), body, None)
}

fn payload_body(ctx: &EffectCtx) -> Vec<u8> {
    match &ctx.payload {
        serde_json::Value::Null => Vec::new(),
        v => v.to_string().into_bytes(),
    }
}

impl Effect for HttpDestination {
    async fn perform(&self, ctx: &EffectCtx) -> EffectOutcome {
        let secrets = &self.shape.secrets;
        match self.send(ctx).await {
            EffectOutcome::NotSent(why) => EffectOutcome::NotSent(secrets.redact(why)),
            EffectOutcome::Unknown(why) => EffectOutcome::Unknown(secrets.redact(why)),
            EffectOutcome::Failed(why) => EffectOutcome::Failed(secrets.redact(why)),
            done => done,
        }
    }

    async fn lookup(&self, ctx: &EffectCtx) -> LookupOutcome {
        match self.look(ctx).await {
            LookupOutcome::Unavailable(why) => {
                LookupOutcome::Unavailable(self.shape.secrets.redact(why))
            }
            found => found,
        }
    }

    async fn withdraw(&self, ctx: &EffectCtx, external_ref: &str) -> WithdrawOutcome {
        match self.remove(ctx, external_ref).await {
            WithdrawOutcome::NotWithdrawn(why) => {
                WithdrawOutcome::NotWithdrawn(self.shape.secrets.redact(why))
            }
            gone => gone,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_request_that_cannot_be_built_is_not_sent() {
        // Port 9 (discard) is never reached: the header fails first.
        let err = reqwest::Client::new()
            .post("http://127.0.0.1:9/items")
            .header("Idempotency-Key", "job:a\nb")
            .send()
            .await
            .unwrap_err();
        match classify_send_error(&err) {
            EffectOutcome::NotSent(why) => assert!(why.contains("could not be built"), "{why}"),
            other => panic!("a request never built was classified {other:?}"),
        }
    }

    #[test]
    fn every_response_class_maps_as_the_design_says() {
        let ok = |code| StatusCode::from_u16(code).unwrap();
        assert!(
            matches!(classify_send(ok(201), br#"{"id":"a1"}"#), EffectOutcome::Done { external_ref: Some(r), .. } if r == "a1")
        );
        assert!(matches!(
            classify_send(ok(200), b"{}"),
            EffectOutcome::Failed(_)
        ));
        assert!(matches!(
            classify_send(ok(200), b"nonsense"),
            EffectOutcome::Failed(_)
        ));
        for code in [408, 409, 429, 500, 503] {
            assert!(
                matches!(classify_send(ok(code), b""), EffectOutcome::Unknown(_)),
                "{code}"
            );
        }
        for code in [400, 401, 404, 422] {
            assert!(
                matches!(classify_send(ok(code), b""), EffectOutcome::Failed(_)),
                "{code}"
            );
        }
        assert!(matches!(
            classify_send(ok(302), b""),
            EffectOutcome::Failed(_)
        ));
    }
}
