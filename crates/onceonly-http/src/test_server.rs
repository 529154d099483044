//! A real HTTP destination on 127.0.0.1 that counts what reaches it, for the
//! replay harness and end-to-end tests. It speaks the protocol of docs/DESIGN.md
//! section 6 in one of three modes, and can be told to misbehave.
//!
//! It serves https:// when started with [`TestServer::start_tls`], or by
//! [`TestServer::start`] when the environment names a certificate and key
//! (`ONCEONLY_TEST_TLS_CERT`, `ONCEONLY_TEST_TLS_KEY`): that runs every test
//! and replay scenario that uses it over HTTPS (clients then trust its CA
//! through `SSL_CERT_FILE`; see `.ci/steps/35-https.sh`).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get};
use axum::{Json, Router};
use serde::Deserialize;

use crate::tls_listener::{TlsIdentity, TlsListener};

/// How the destination treats repeats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Dedups on the `Idempotency-Key` header: a repeat gets the first id.
    Keyed,
    /// No dedup, but items can be looked up by idempotency key.
    Searchable,
    /// Neither: every POST creates an item; lookups answer 501.
    Neither,
}

#[derive(Default)]
struct Items {
    next_id: u64,
    /// id -> (idempotency key, live)
    by_id: HashMap<String, (String, bool)>,
    /// idempotency key -> ids created for it, in order
    by_key: HashMap<String, Vec<String>>,
    /// POSTs still to answer 503 after creating the item.
    unknown_after_create: u32,
    /// How long each POST waits before creating its item.
    delay_before_create: Duration,
    /// How long each POST waits after creating its item, before answering.
    delay_after_create: Duration,
    refuse_deletes: bool,
    posts: u64,
}

#[derive(Clone)]
struct Shared {
    mode: Mode,
    items: Arc<Mutex<Items>>,
}

/// A running destination. Dropping it does not stop it; it lives until the
/// process ends (tests are short).
#[derive(Clone)]
pub struct TestServer {
    addr: SocketAddr,
    tls: bool,
    shared: Shared,
}

impl TestServer {
    /// Starts a destination on an ephemeral port of 127.0.0.1: over TLS when
    /// `ONCEONLY_TEST_TLS_CERT` and `ONCEONLY_TEST_TLS_KEY` name PEM files.
    pub async fn start(mode: Mode) -> std::io::Result<Self> {
        match (
            std::env::var_os("ONCEONLY_TEST_TLS_CERT"),
            std::env::var_os("ONCEONLY_TEST_TLS_KEY"),
        ) {
            (Some(cert), Some(key)) => {
                let identity = TlsIdentity::from_files(cert.as_ref(), key.as_ref())?;
                Self::start_tls(mode, &identity).await
            }
            _ => Self::serve(mode, None).await,
        }
    }

    /// Starts an https:// destination with this certificate and key.
    pub async fn start_tls(mode: Mode, identity: &TlsIdentity) -> std::io::Result<Self> {
        Self::serve(mode, Some(identity)).await
    }

    async fn serve(mode: Mode, tls: Option<&TlsIdentity>) -> std::io::Result<Self> {
        let shared = Shared {
            mode,
            items: Arc::default(),
        };
        let app = Router::new()
            .route("/items", get(lookup).post(create))
            .route("/items/{id}", delete(remove))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        match tls {
            Some(identity) => {
                let listener = TlsListener::new(listener, identity)?;
                tokio::spawn(async move {
                    let _ = axum::serve(listener, app).await;
                });
            }
            None => {
                tokio::spawn(async move {
                    let _ = axum::serve(listener, app).await;
                });
            }
        }
        Ok(Self {
            addr,
            tls: tls.is_some(),
            shared,
        })
    }

    /// `http://127.0.0.1:PORT`, or `https://` when serving TLS.
    pub fn base_url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// Items ever created for idempotency key `JOB:KEY` (withdrawn ones included).
    pub fn effects(&self, idempotency_key: &str) -> usize {
        let items = self.shared.items.lock().unwrap();
        items.by_key.get(idempotency_key).map_or(0, Vec::len)
    }

    /// Items for `JOB:KEY` that are live (created and not withdrawn).
    pub fn live(&self, idempotency_key: &str) -> usize {
        let items = self.shared.items.lock().unwrap();
        items
            .by_key
            .get(idempotency_key)
            .map_or(0, |ids| ids.iter().filter(|id| items.by_id[*id].1).count())
    }

    /// Every idempotency key that reached the destination, with its item count.
    pub fn all_effects(&self) -> HashMap<String, usize> {
        let items = self.shared.items.lock().unwrap();
        items
            .by_key
            .iter()
            .map(|(k, v)| (k.clone(), v.len()))
            .collect()
    }

    /// POST requests received.
    pub fn posts(&self) -> u64 {
        self.shared.items.lock().unwrap().posts
    }

    /// The next `n` POSTs create their item, then answer 503 (an unknown outcome).
    pub fn unknown_after_create(&self, n: u32) {
        self.shared.items.lock().unwrap().unknown_after_create = n;
    }

    /// Every POST waits this long before creating its item.
    pub fn delay_before_create(&self, d: Duration) {
        self.shared.items.lock().unwrap().delay_before_create = d;
    }

    /// Every POST creates its item at once, then waits this long before
    /// answering: a client killed meanwhile has done the effect unrecorded.
    pub fn delay_after_create(&self, d: Duration) {
        self.shared.items.lock().unwrap().delay_after_create = d;
    }

    /// DELETEs answer 500 and withdraw nothing.
    pub fn refuse_deletes(&self, refuse: bool) {
        self.shared.items.lock().unwrap().refuse_deletes = refuse;
    }
}

fn json_id(code: StatusCode, id: &str) -> Response {
    (code, Json(serde_json::json!({ "id": id }))).into_response()
}

async fn create(State(s): State<Shared>, headers: HeaderMap) -> Response {
    let Some(key) = headers
        .get("Idempotency-Key")
        // onceonly sends keys as UTF-8 bytes (an HTTP header's obs-text);
        // `to_str` would take ASCII only.
        .and_then(|v| String::from_utf8(v.as_bytes().to_vec()).ok())
    else {
        return (StatusCode::BAD_REQUEST, "Idempotency-Key header required").into_response();
    };
    let delay = {
        let mut items = s.items.lock().unwrap();
        items.posts += 1;
        items.delay_before_create
    };
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let (response, delay) = {
        let mut items = s.items.lock().unwrap();
        let repeat = match s.mode {
            Mode::Keyed => items.by_key.get(&key).and_then(|ids| ids.first()).cloned(),
            _ => None,
        };
        let response = match repeat {
            Some(first) => json_id(StatusCode::OK, &first),
            None => {
                items.next_id += 1;
                let id = format!("item-{}", items.next_id);
                items.by_id.insert(id.clone(), (key.clone(), true));
                items.by_key.entry(key).or_default().push(id.clone());
                if items.unknown_after_create > 0 {
                    items.unknown_after_create -= 1;
                    (
                        StatusCode::SERVICE_UNAVAILABLE,
                        "created, but answering 503",
                    )
                        .into_response()
                } else {
                    json_id(StatusCode::CREATED, &id)
                }
            }
        };
        (response, items.delay_after_create)
    };
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    response
}

#[derive(Deserialize)]
struct LookupQuery {
    idempotency_key: String,
}

async fn lookup(State(s): State<Shared>, Query(q): Query<LookupQuery>) -> Response {
    if s.mode == Mode::Neither {
        return (
            StatusCode::NOT_IMPLEMENTED,
            "this destination has no lookup",
        )
            .into_response();
    }
    let items = s.items.lock().unwrap();
    let live = items
        .by_key
        .get(&q.idempotency_key)
        .and_then(|ids| ids.iter().find(|id| items.by_id[*id].1));
    match live {
        Some(id) => json_id(StatusCode::OK, id),
        None => (StatusCode::NOT_FOUND, "{}").into_response(),
    }
}

async fn remove(State(s): State<Shared>, Path(id): Path<String>) -> Response {
    let mut items = s.items.lock().unwrap();
    if items.refuse_deletes {
        return (StatusCode::INTERNAL_SERVER_ERROR, "deletes are failing").into_response();
    }
    match items.by_id.get_mut(&id) {
        Some(item) => {
            item.1 = false;
            StatusCode::NO_CONTENT.into_response()
        }
        None => StatusCode::NOT_FOUND.into_response(),
    }
}
