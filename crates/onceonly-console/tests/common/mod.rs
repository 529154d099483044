//! What the console's tests share: fresh databases, a console served on a
//! free loopback port, operations left as dead workers leave them, a
//! logged-in HTTP client.

#![allow(dead_code)]

use std::time::Duration;

use onceonly::operator::OperatorStore;
use onceonly::store::{ClaimRow, OpAudit, OpClaim, OpTakeOver};
use onceonly::{AuditKind, Payload, State, Store};
use onceonly_console::Options;
use onceonly_postgres::{PgOptions, PgStore};
use onceonly_sqlite::SqliteStore;

/// A fresh, migrated SQLite file.
pub async fn sqlite() -> (String, SqliteStore) {
    let dir = tempfile::Builder::new()
        .prefix("onceonly-console")
        .tempdir()
        .unwrap()
        .keep();
    let url = format!("sqlite://{}", dir.join("console.db").display());
    let store = SqliteStore::connect(&url).await.unwrap();
    store.migrate().await.unwrap();
    (url, store)
}

/// A fresh, migrated schema on the test PostgreSQL, or `None` (skip,
/// loudly) when it is unreachable and `ONCEONLY_SKIP_PG=1` is set outside
/// CI; an unreachable database fails the test otherwise
/// ([`onceonly_sqlx::test_db::TestDb::ready`]).
pub async fn postgres(test: &str) -> Option<(String, PgStore)> {
    let url = onceonly_sqlx::test_db::pg_url();
    // The naming the PostgreSQL store's tests sweep after an hour.
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let schema = format!("t_{secs:08x}_{:08x}", rand::random::<u32>());
    let options = PgOptions::default().schema(schema).max_connections(4);
    match PgStore::connect_with(&url, options).await {
        Ok(store) => {
            store.migrate().await.unwrap();
            Some((url, store))
        }
        Err(e) => {
            onceonly_sqlx::test_db::PG.ready(test, Some(e.to_string()));
            None
        }
    }
}

/// Serves the console (`onceonly_console::serve`, the server the binary
/// runs) on a free loopback port; its base URL.
pub async fn serve<S: OperatorStore + Clone>(store: S, options: Options) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        onceonly_console::serve(store, options, listener)
            .await
            .unwrap()
    });
    format!("http://{addr}")
}

/// A client that keeps cookies and does not follow redirects (so tests see
/// the 303 an action answers).
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .cookie_store(true)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// A client logged in as `name` (with `token` when the console has one).
pub async fn logged_in(base: &str, name: &str, token: Option<&str>) -> reqwest::Client {
    let c = client();
    let res = c
        .post(format!("{base}/login"))
        .form(&[
            ("name", name),
            ("token", token.unwrap_or("")),
            ("next", "/"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(
        res.status(),
        303,
        "login as {name}: {}",
        res.text().await.unwrap()
    );
    c
}

/// A page's status and body.
pub async fn get(c: &reqwest::Client, url: &str) -> (u16, String) {
    let res = c.get(url).send().await.unwrap();
    (res.status().as_u16(), res.text().await.unwrap())
}

/// The value of the first hidden field `name` on a page.
pub fn field(html: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\" value=\"");
    let start = html
        .find(&marker)
        .unwrap_or_else(|| panic!("no field {name} on the page:\n{html}"))
        + marker.len();
    let end = html[start..].find('"').unwrap() + start;
    html[start..end].to_owned()
}

/// The operation page's path (the console's own encoding of it).
pub fn op_path(job: &str, key: &str) -> String {
    let q = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("job", job)
        .append_pair("key", key)
        .finish();
    format!("/op?{q}")
}

/// A claim whose lease is already over (a worker that died); its token.
pub async fn dead_claim<S: Store>(store: &S, job: &str, key: &str, payload: &Payload) -> i64 {
    let claim = store
        .op_claim(&OpClaim {
            job_type: job,
            op_key: key,
            fingerprint: &payload.fingerprint,
            payload: payload.json.as_deref(),
            owner: "worker-dead",
            lease: Duration::ZERO,
        })
        .await
        .unwrap();
    match claim {
        ClaimRow::Claimed(c) => c.token,
        other => panic!("{job}:{key}: expected a fresh claim, got {other:?}"),
    }
}

/// An operation held for a person after its worker died; its token.
pub async fn held<S: Store>(store: &S, job: &str, key: &str) -> i64 {
    held_with(
        store,
        job,
        key,
        &Payload::parse(r#"{"to":"a@example.com"}"#).unwrap(),
    )
    .await
}

/// [`held`] with `payload`.
pub async fn held_with<S: Store>(store: &S, job: &str, key: &str, payload: &Payload) -> i64 {
    let stale = dead_claim(store, job, key, payload).await;
    let taken = store
        .op_take_over(&OpTakeOver {
            job_type: job,
            op_key: key,
            stale_token: stale,
            to: State::Held,
            owner: "worker-sweeper",
            lease: Duration::from_secs(30),
            reason: "lease over, outcome unknown: held for a person",
        })
        .await
        .unwrap();
    assert!(taken.is_some(), "{job}:{key}: the take-over into held");
    // What the guard's sweep appends after such a take-over.
    store
        .op_audit(&OpAudit {
            job_type: job,
            op_key: key,
            event: AuditKind::TakeOver,
            actor: "worker-sweeper",
            token: stale + 1,
            from: Some(State::Claimed),
            to: Some(State::Held),
            detail: Some("lease over, outcome unknown: held for a person"),
            attempt: None,
            retry_after: None,
        })
        .await
        .unwrap();
    stale + 1
}
