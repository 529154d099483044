//! Each mapping of a destination's shape, against a real HTTP server that
//! speaks another shape than the test protocol: a payment-style API (bearer
//! token, its own idempotency header, the id deep in the JSON, Location,
//! search by key, refund to withdraw) and a signed webhook.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use onceonly::{
    Effect, EffectCtx, EffectKind, EffectOutcome, LookupOutcome, StalePolicy, WithdrawOutcome,
};
use onceonly_http::{ClientOptions, HttpDestination, Shape, ShapeSpec};

const TOKEN: &str = "tok-7f3a9c0e-secret";
const HOOK_SECRET: &str = "whsec-81b2-secret";

#[derive(Default)]
struct Api {
    /// request key -> charge id
    by_key: HashMap<String, String>,
    /// charge id -> refunded
    charges: BTreeMap<String, bool>,
    bodies: Vec<serde_json::Value>,
    hooks: Vec<(String, Bytes)>,
}

type Shared = Arc<Mutex<Api>>;

fn authorized(headers: &HeaderMap) -> bool {
    headers.get("authorization").and_then(|v| v.to_str().ok()) == Some(&format!("Bearer {TOKEN}"))
}

async fn charge(
    State(api): State<Shared>,
    headers: HeaderMap,
    Json(body): Json<serde_json::Value>,
) -> Response {
    if !authorized(&headers) {
        return (StatusCode::UNAUTHORIZED, "no or bad token").into_response();
    }
    let Some(key) = headers.get("x-request-key").and_then(|v| v.to_str().ok()) else {
        return (StatusCode::BAD_REQUEST, "X-Request-Key required").into_response();
    };
    let mut api = api.lock().unwrap();
    api.bodies.push(body);
    let id = match api.by_key.get(key) {
        Some(id) => id.clone(),
        None => {
            let id = format!("ch_{}", api.charges.len() + 1);
            api.by_key.insert(key.to_owned(), id.clone());
            api.charges.insert(id.clone(), false);
            id
        }
    };
    (
        StatusCode::CREATED,
        [("location", format!("/v1/charges/{id}"))],
        Json(serde_json::json!({ "charge": { "id": id, "status": "succeeded" } })),
    )
        .into_response()
}

async fn search(
    State(api): State<Shared>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    if !authorized(&headers) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let api = api.lock().unwrap();
    let data: Vec<_> = api
        .by_key
        .get(&q["key"])
        .map(|id| serde_json::json!({ "id": id }))
        .into_iter()
        .collect();
    Json(serde_json::json!({ "data": data })).into_response()
}

async fn refund(State(api): State<Shared>, headers: HeaderMap, Path(id): Path<String>) -> Response {
    if !authorized(&headers) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    match api.lock().unwrap().charges.get_mut(&id) {
        Some(refunded) => {
            *refunded = true;
            StatusCode::OK.into_response()
        }
        None => StatusCode::GONE.into_response(),
    }
}

async fn status(Path(code): Path<u16>) -> Response {
    (
        StatusCode::from_u16(code).unwrap(),
        format!("answering {code}"),
    )
        .into_response()
}

async fn hook(State(api): State<Shared>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let sig = headers
        .get("x-signature")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    api.lock().unwrap().hooks.push((sig, body));
    StatusCode::NO_CONTENT
}

async fn start() -> (String, Shared) {
    let api = Shared::default();
    let app = Router::new()
        .route("/v1/charges", post(charge))
        .route("/v1/charges/search", get(search))
        .route("/v1/charges/{id}/refund", post(refund))
        .route("/status/{code}", post(status))
        .route("/hook", post(hook))
        .with_state(api.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (base, api)
}

fn spec(toml_text: &str) -> ShapeSpec {
    toml::from_str(toml_text).unwrap()
}

fn env(name: &str) -> Option<String> {
    match name {
        "PAY_TOKEN" => Some(TOKEN.to_owned()),
        "HOOK_SECRET" => Some(HOOK_SECRET.to_owned()),
        _ => None,
    }
}

fn destination(base: &str, spec: &ShapeSpec) -> HttpDestination {
    let shape = Shape::resolve(spec, env).unwrap();
    let options = ClientOptions {
        request_timeout: Duration::from_secs(5),
        ca_cert: None,
    };
    HttpDestination::with_shape(base, shape, &options).unwrap()
}

const PAYMENT_API: &str = r#"
url = "{base}/v1/charges"
headers = { Authorization = "Bearer {env.PAY_TOKEN}" }
idempotency_header = "X-Request-Key"
body = { amount = "{payload.amount}", currency = "eur", note = "order {key}" }
reference = "/charge/id"
lookup = { url = "{base}/v1/charges/search?key={idempotency_key}", reference = "/data/0/id", empty_means_not_found = true }
withdraw = { method = "POST", url = "{base}/v1/charges/{ref}/refund", gone = ["2xx", 410] }
"#;

#[tokio::test]
async fn a_payment_api_bearer_token_header_name_pointer_lookup_and_withdraw() {
    let (base, api) = start().await;
    let d = destination(&base, &spec(PAYMENT_API));
    let ctx = EffectCtx::detached("charge", "o 7/1", serde_json::json!({ "amount": 1250 }));

    assert!(
        matches!(d.lookup(&ctx).await, LookupOutcome::NotFound),
        "an empty search is not found"
    );
    let first = d.perform(&ctx).await;
    let EffectOutcome::Done {
        external_ref: Some(id),
        ..
    } = first
    else {
        panic!("{first:?}")
    };
    assert_eq!(id, "ch_1");
    // The body template kept the number a number and filled the text.
    assert_eq!(
        api.lock().unwrap().bodies[0],
        serde_json::json!({ "amount": 1250, "currency": "eur", "note": "order o 7/1" })
    );
    // The repeat carries the same key in X-Request-Key: the API dedups it.
    let again = d.perform(&ctx).await;
    assert!(
        matches!(again, EffectOutcome::Done { external_ref: Some(ref r), .. } if r == "ch_1"),
        "{again:?}"
    );
    assert_eq!(api.lock().unwrap().charges.len(), 1);
    // The lookup's key is percent-encoded in the URL and found.
    match d.lookup(&ctx).await {
        LookupOutcome::Found {
            external_ref: Some(r),
            ..
        } => assert_eq!(r, "ch_1"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        d.withdraw(&ctx, "ch_1").await,
        WithdrawOutcome::Withdrawn
    ));
    assert!(api.lock().unwrap().charges["ch_1"]);
    // 410 was named gone; 404 (no route) is not, so the item may still be there.
    assert!(matches!(
        d.withdraw(&ctx, "ch_9").await,
        WithdrawOutcome::Withdrawn
    ));
    let other = Shape::resolve(&spec(&PAYMENT_API.replace("/refund", "/nowhere")), env).unwrap();
    let options = ClientOptions {
        request_timeout: Duration::from_secs(5),
        ca_cert: None,
    };
    let d2 = HttpDestination::with_shape(&base, other, &options).unwrap();
    assert!(matches!(
        d2.withdraw(&ctx, "ch_1").await,
        WithdrawOutcome::NotWithdrawn(_)
    ));

    // Without the token the API refuses: a permanent failure, and the
    // message does not carry the token.
    let no_token = spec(&PAYMENT_API.replace("{env.PAY_TOKEN}", "wrong"));
    let d3 = destination(&base, &no_token);
    match d3.perform(&ctx).await {
        EffectOutcome::Failed(why) => assert!(why.contains("401"), "{why}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn the_reference_from_a_location_header_made_absolute() {
    let (base, _api) = start().await;
    let text = PAYMENT_API.replace(
        r#"reference = "/charge/id""#,
        r#"reference = "header:Location""#,
    );
    let d = destination(&base, &spec(&text));
    let ctx = EffectCtx::detached("charge", "k1", serde_json::json!({ "amount": 5 }));
    match d.perform(&ctx).await {
        EffectOutcome::Done {
            external_ref: Some(r),
            ..
        } => assert_eq!(r, format!("{base}/v1/charges/ch_1")),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn status_classes_override_the_defaults_and_keep_them_elsewhere() {
    let (base, _api) = start().await;
    let text = r#"
url = "{base}/status/{payload.code}"
reference = "none"
not_sent = [503]
permanent = ["500-502"]
done = [409]
"#;
    let d = destination(&base, &spec(text));
    let at = |code: u16| EffectCtx::detached("s", "k", serde_json::json!({ "code": code }));
    let outcome = |o: EffectOutcome| match o {
        EffectOutcome::Done { .. } => "done",
        EffectOutcome::NotSent(_) => "not sent",
        EffectOutcome::Unknown(_) => "unknown",
        EffectOutcome::Failed(_) => "permanent",
    };
    for (code, want) in [
        (200, "done"),
        (409, "done"),
        (503, "not sent"),
        (500, "permanent"),
        (504, "unknown"),
        (429, "unknown"),
        (400, "permanent"),
    ] {
        assert_eq!(outcome(d.perform(&at(code)).await), want, "status {code}");
    }
    // A payload without the field the URL needs: nothing sent, for good.
    let bare = EffectCtx::detached("s", "k", serde_json::json!({}));
    match d.perform(&bare).await {
        EffectOutcome::Failed(why) => assert!(
            why.contains("no field code") && why.contains("nothing was sent"),
            "{why}"
        ),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_signed_webhook_without_key_or_lookup() {
    use hmac::{Hmac, Mac};
    let (base, api) = start().await;
    let text = r#"
url = "{base}/hook"
idempotency_header = "none"
reference = "none"
sign = { header = "X-Signature", secret_env = "HOOK_SECRET", prefix = "sha256=" }
"#;
    let shape = Shape::resolve(&spec(text), env).unwrap();
    assert!(shape
        .check_effect(EffectKind::Keyed)
        .unwrap_err()
        .contains("cannot be keyed"));
    assert!(shape
        .check_effect(EffectKind::Lookup)
        .unwrap_err()
        .contains("lookup request"));
    shape
        .check_effect(EffectKind::Opaque(StalePolicy::Hold))
        .unwrap();
    let d = destination(&base, &spec(text));
    let ctx = EffectCtx::detached("notify", "n1", serde_json::json!({ "text": "deployed" }));
    assert!(matches!(
        d.perform(&ctx).await,
        EffectOutcome::Done {
            external_ref: None,
            ..
        }
    ));
    let (sig, body) = api.lock().unwrap().hooks[0].clone();
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(HOOK_SECRET.as_bytes()).unwrap();
    mac.update(&body);
    assert_eq!(
        sig,
        format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
    );
    assert_eq!(&body[..], br#"{"text":"deployed"}"#);
    assert!(matches!(
        d.lookup(&ctx).await,
        LookupOutcome::Unavailable(_)
    ));
}

#[test]
fn a_missing_variable_is_named_and_a_secret_is_never_shown() {
    let err = Shape::resolve(&spec(PAYMENT_API), |_| None).unwrap_err();
    assert!(
        err.contains("environment variable PAY_TOKEN not set"),
        "{err}"
    );
    let signed = spec(
        r#"
headers = { "X-Api-Key" = "{env.KEY_A}" }
sign = { header = "X-Sig", secret_env = "KEY_B" }
"#,
    );
    let err = Shape::resolve(&signed, |_| None).unwrap_err();
    assert!(err.contains("variables KEY_A, KEY_B not set"), "{err}");
    let shape = Shape::resolve(&spec(PAYMENT_API), env).unwrap();
    assert!(
        !format!("{shape:?}").contains(TOKEN),
        "Debug shows no secret"
    );
    assert_eq!(
        shape.secrets.redact(format!("echo: Bearer {TOKEN}")),
        "echo: Bearer [secret]"
    );
}

#[test]
fn a_credential_over_plain_http_to_another_host_is_refused_unless_allowed() {
    let options = ClientOptions {
        request_timeout: Duration::from_secs(5),
        ca_cert: None,
    };
    let shape = || Shape::resolve(&spec(PAYMENT_API), env).unwrap();
    let err = HttpDestination::with_shape("http://pay.example.com", shape(), &options)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("plain http://") && err.contains("pay.example.com"),
        "{err}"
    );
    HttpDestination::with_shape("https://pay.example.com", shape(), &options).unwrap();
    HttpDestination::with_shape("http://127.0.0.1:9", shape(), &options).unwrap();
    HttpDestination::with_shape("http://localhost:9", shape(), &options).unwrap();
    let allowed = Shape::resolve(
        &spec(&format!("allow_insecure_credentials = true\n{PAYMENT_API}")),
        env,
    )
    .unwrap();
    HttpDestination::with_shape("http://pay.example.com", allowed, &options).unwrap();
    // No credential: plain HTTP anywhere is the user's business.
    HttpDestination::with_shape("http://pay.example.com", Shape::default(), &options).unwrap();
}

#[test]
fn bad_shapes_are_named() {
    for (text, want) in [
        ("url = \"/v1/x\"", "must start with {base}"),
        ("url = \"{base}/{nope}\"", "unknown placeholder {nope}"),
        ("reference = \"id\"", "not a JSON pointer"),
        ("done = [\"6xx\"]", "done"),
        ("method = \"GE T\"", "not an HTTP method"),
        ("idempotency_header = \"bad header\"", "idempotency_header"),
        (
            "lookup = { url = \"{base}/s\", reference = \"none\" }",
            "lookup.reference",
        ),
    ] {
        let err = Shape::resolve(&spec(text), env).unwrap_err();
        assert!(err.contains(want), "{text}: {err}");
    }
}
