//! The HTTP destination of docs/DESIGN.md section 6, as an onceonly [`Effect`].
//!
//! - send: `POST BASE/items` with header `Idempotency-Key: JOB:KEY` and the
//!   payload as body; 2xx with `{"id": ...}` is done.
//! - lookup: `GET BASE/items?idempotency_key=JOB:KEY`: 200 found, 404 not found.
//! - withdraw: `DELETE BASE/items/ID`: 2xx or 404 gone.
//!
//! Every response class maps to done, not sent, unknown or permanent
//! failure, as [`classify_send`] documents.
#![forbid(unsafe_code)]

use std::time::Duration;

use onceonly::{Effect, EffectCtx, EffectOutcome, LookupOutcome, WithdrawOutcome};
use reqwest::StatusCode;
use serde::Deserialize;

#[cfg(feature = "test-server")]
pub mod test_server;

/// The effect that sends a job's payload to an HTTP destination.
#[derive(Debug, Clone)]
pub struct HttpDestination {
    client: reqwest::Client,
    base: String,
}

#[derive(Deserialize)]
struct Created {
    id: Option<serde_json::Value>,
}

impl HttpDestination {
    /// A destination at `base_url` (no trailing `/items`), each request
    /// bounded by `request_timeout`.
    pub fn new(base_url: &str, request_timeout: Duration) -> onceonly::Result<Self> {
        let parsed = reqwest::Url::parse(base_url).map_err(|e| {
            onceonly::Error::Invalid(format!("destination {base_url:?} is not a URL: {e}"))
        })?;
        if !matches!(parsed.scheme(), "http") {
            return Err(onceonly::Error::Invalid(format!(
                "destination {base_url:?}: only http:// destinations are supported in this build"
            )));
        }
        let client = reqwest::Client::builder()
            .timeout(request_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .build()
            .map_err(|e| onceonly::Error::Invalid(format!("HTTP client: {e}")))?;
        Ok(Self {
            client,
            base: base_url.trim_end_matches('/').to_owned(),
        })
    }

    /// The base URL.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    fn item_url(&self, id: &str) -> Result<reqwest::Url, String> {
        let mut url =
            reqwest::Url::parse(&format!("{}/items", self.base)).map_err(|e| e.to_string())?;
        url.path_segments_mut()
            .map_err(|_| "base URL cannot take a path".to_owned())?
            .push(id);
        Ok(url)
    }
}

/// What a send's transport error means: a request that could not be built,
/// or a connection refused before any byte was written, is not sent; anything
/// later may have reached the destination.
pub fn classify_send_error(e: &reqwest::Error) -> EffectOutcome {
    if e.is_builder() {
        EffectOutcome::NotSent(format!(
            "the request could not be built, nothing was sent: {e}"
        ))
    } else if e.is_connect() {
        EffectOutcome::NotSent(format!("connection failed before sending: {e}"))
    } else if e.is_timeout() {
        EffectOutcome::Unknown(format!("timed out after sending: {e}"))
    } else {
        EffectOutcome::Unknown(format!("transport error after sending: {e}"))
    }
}

/// What a send's response means (docs/DESIGN.md section 6).
pub fn classify_send(status: StatusCode, body: &[u8]) -> EffectOutcome {
    let code = status.as_u16();
    if status.is_success() {
        return match serde_json::from_slice::<Created>(body)
            .ok()
            .and_then(|c| c.id)
        {
            Some(serde_json::Value::String(id)) if !id.is_empty() => EffectOutcome::Done {
                external_ref: Some(id.clone()),
                result: serde_json::json!({ "id": id }),
            },
            Some(serde_json::Value::Number(n)) => EffectOutcome::Done {
                external_ref: Some(n.to_string()),
                result: serde_json::json!({ "id": n.to_string() }),
            },
            _ => EffectOutcome::Failed(format!(
                "destination answered {code} without an id: it breaks the protocol (body: {})",
                snippet(body)
            )),
        };
    }
    match code {
        408 | 409 | 429 | 500..=599 => {
            EffectOutcome::Unknown(format!("destination answered {code}: {}", snippet(body)))
        }
        400..=499 => EffectOutcome::Failed(format!(
            "destination refused with {code}: {}",
            snippet(body)
        )),
        _ => EffectOutcome::Failed(format!(
            "destination answered {code}, which the protocol does not allow"
        )),
    }
}

fn snippet(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut s: String = text.chars().take(200).collect();
    if text.chars().count() > 200 {
        s.push('…');
    }
    s
}

fn payload_body(ctx: &EffectCtx) -> Vec<u8> {
    match &ctx.payload {
        serde_json::Value::Null => Vec::new(),
        v => v.to_string().into_bytes(),
    }
}

impl Effect for HttpDestination {
    async fn perform(&self, ctx: &EffectCtx) -> EffectOutcome {
        let sent = self
            .client
            .post(format!("{}/items", self.base))
            .header("Idempotency-Key", &ctx.idempotency_key)
            .header("Content-Type", "application/json")
            .body(payload_body(ctx))
            .send()
            .await;
        let response = match sent {
            Ok(r) => r,
            Err(e) => return classify_send_error(&e),
        };
        let status = response.status();
        match response.bytes().await {
            Ok(body) => classify_send(status, &body),
            Err(e) if status.is_success() => EffectOutcome::Unknown(format!(
                "destination answered {status} but the body was lost: {e}"
            )),
            Err(_) => classify_send(status, b""),
        }
    }

    async fn lookup(&self, ctx: &EffectCtx) -> LookupOutcome {
        let response = self
            .client
            .get(format!("{}/items", self.base))
            .query(&[("idempotency_key", &ctx.idempotency_key)])
            .send()
            .await;
        let response = match response {
            Ok(r) => r,
            Err(e) => return LookupOutcome::Unavailable(format!("lookup failed: {e}")),
        };
        let status = response.status();
        let body = response.bytes().await.unwrap_or_default();
        match status.as_u16() {
            200 => match classify_send(status, &body) {
                EffectOutcome::Done {
                    external_ref,
                    result,
                } => LookupOutcome::Found {
                    external_ref,
                    result,
                },
                _ => LookupOutcome::Unavailable(format!(
                    "lookup answered 200 without an id: {}",
                    snippet(&body)
                )),
            },
            404 => LookupOutcome::NotFound,
            code => {
                LookupOutcome::Unavailable(format!("lookup answered {code}: {}", snippet(&body)))
            }
        }
    }

    async fn withdraw(&self, _ctx: &EffectCtx, external_ref: &str) -> WithdrawOutcome {
        let url = match self.item_url(external_ref) {
            Ok(u) => u,
            Err(e) => return WithdrawOutcome::NotWithdrawn(e),
        };
        match self.client.delete(url).send().await {
            Ok(r) if r.status().is_success() || r.status() == StatusCode::NOT_FOUND => {
                WithdrawOutcome::Withdrawn
            }
            Ok(r) => WithdrawOutcome::NotWithdrawn(format!(
                "delete of item {external_ref} answered {}: the item may still be there",
                r.status()
            )),
            Err(e) => WithdrawOutcome::NotWithdrawn(format!(
                "delete of item {external_ref} failed: {e}; the item may still be there"
            )),
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
