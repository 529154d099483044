//! The console over plain HTTP, on SQLite and PostgreSQL: login and token,
//! resolve and cancel from the pages, fencing against a row that moved,
//! CSRF, read-only mode, ugly keys, no secrets on pages.

mod common;

use std::net::SocketAddr;

use common::*;
use onceonly::operator::OperatorStore;
use onceonly::{
    ops, AuditKind, EffectCtx, EffectFn, EffectKind, EffectOutcome, Guard, JobSpec, Outcome,
    Payload, State,
};
use onceonly_console::{check_listen, Options};

const TOKEN: &str = "s3cret-console-token";

fn options(url: &str) -> Options {
    let mut o = Options::new(url);
    o.token = Some(TOKEN.into());
    o
}

/// The fields every action form carries: the operation, the state and token
/// the page showed (the fence), and the session's CSRF token.
fn cancel_form(page: &str, job: &str, key: &str) -> Vec<(String, String)> {
    [
        ("job", job.to_owned()),
        ("key", key.to_owned()),
        ("state", field(page, "state")),
        ("token", field(page, "token")),
        ("csrf", field(page, "csrf")),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

/// Sends the cancel form of the operation page `page` as a browser would;
/// returns the response's status.
async fn post_cancel(
    c: &reqwest::Client,
    base: &str,
    page: &str,
    job: &str,
    key: &str,
) -> reqwest::StatusCode {
    c.post(format!("{base}/op/cancel"))
        .form(&cancel_form(page, job, key))
        .send()
        .await
        .unwrap()
        .status()
}

/// The resolve form's fields for the operation page `page`.
fn resolve_form(
    page: &str,
    job: &str,
    key: &str,
    how: &str,
    reason: &str,
) -> Vec<(String, String)> {
    let mut form = cancel_form(page, job, key);
    form.push(("as".to_owned(), how.to_owned()));
    form.push(("reason".to_owned(), reason.to_owned()));
    form
}

async fn pages_need_a_login<S: OperatorStore + Clone>(url: &str, store: S) {
    let base = serve(store, options(url)).await;
    for path in ["/", "/held", "/stuck", "/op?job=j&key=k"] {
        let (status, body) = get(&client(), &format!("{base}{path}")).await;
        assert_eq!(status, 401, "{path} without a session");
        assert!(body.contains("action=\"/login\""), "{path}: {body}");
        assert!(!body.contains("Overview"), "{path} showed content: {body}");
    }
    // A wrong token is refused, and says so without echoing it.
    let c = client();
    let res = c
        .post(format!("{base}/login"))
        .form(&[("name", "mallory"), ("token", "guess-guess"), ("next", "/")])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
    let body = res.text().await.unwrap();
    assert!(body.contains("wrong token"), "{body}");
    assert!(!body.contains("guess-guess"));
    assert_eq!(get(&c, &format!("{base}/")).await.0, 401);
    // A cookie that no login issued is no session.
    let res = client()
        .get(format!("{base}/held"))
        .header("cookie", "onceonly_console=0123abcd")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
    // The right token opens every page.
    let c = logged_in(&base, "alice", Some(TOKEN)).await;
    let (status, body) = get(&c, &format!("{base}/")).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("Overview"));
}

async fn resolve_from_the_page<S: OperatorStore + Clone>(url: &str, store: S) {
    let job = "send_receipt";
    let token = held(&store, job, "order-1").await;
    held(&store, job, "order-2").await;
    let base = serve(store.clone(), options(url)).await;
    let c = logged_in(&base, "alice", Some(TOKEN)).await;

    let (_, overview) = get(&c, &format!("{base}/")).await;
    assert!(overview.contains("<b>2</b><span>held"), "{overview}");
    let (_, list) = get(&c, &format!("{base}/held")).await;
    assert!(
        list.contains(">order-1<") && list.contains(">order-2<"),
        "{list}"
    );
    assert!(
        list.find("order-1").unwrap() < list.find("order-2").unwrap(),
        "oldest first"
    );

    let (status, page) = get(&c, &format!("{base}{}", op_path(job, "order-1"))).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("id=\"resolve-form\""), "{page}");
    assert_eq!(field(&page, "token"), token.to_string());
    let form = resolve_form(
        &page,
        job,
        "order-1",
        "queued",
        "the provider shows no such mail",
    );
    let res = c
        .post(format!("{base}/op/resolve"))
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303);
    let back = res.headers()["location"].to_str().unwrap().to_owned();
    assert_eq!(back, op_path(job, "order-1"));
    let (_, after) = get(&c, &format!("{base}{back}")).await;
    assert!(after.contains("Resolved as queued"), "{after}");

    let now = ops::get(&store, job, "order-1").await.unwrap().record;
    assert_eq!(now.state, State::Queued);
    let history = store.op_history(job, "order-1").await.unwrap();
    let last = history.last().unwrap();
    assert_eq!(last.event, AuditKind::Resolved);
    assert_eq!(last.actor, "alice (console)");
    assert!(
        after.contains("alice (console)"),
        "the page shows the history entry"
    );
    let (_, list) = get(&c, &format!("{base}/held")).await;
    assert!(!list.contains(">order-1<"), "left the held list: {list}");
    assert!(list.contains(">order-2<"));

    // Completed with a reference.
    let (_, page) = get(&c, &format!("{base}{}", op_path(job, "order-2"))).await;
    let mut form = resolve_form(
        &page,
        job,
        "order-2",
        "completed",
        "found it at the provider",
    );
    form.push(("ref".into(), "msg-77".into()));
    let res = c
        .post(format!("{base}/op/resolve"))
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303);
    let r = ops::get(&store, job, "order-2").await.unwrap().record;
    assert_eq!(
        (r.state, r.external_ref.as_deref()),
        (State::Completed, Some("msg-77"))
    );
}

async fn a_stale_form_changes_nothing<S: OperatorStore + Clone>(url: &str, store: S) {
    let job = "send_receipt";
    held(&store, job, "order-9").await;
    let base = serve(store.clone(), options(url)).await;
    let c = logged_in(&base, "alice", Some(TOKEN)).await;
    let path = op_path(job, "order-9");
    // Two tabs load the page; the first resolves.
    let (_, first) = get(&c, &format!("{base}{path}")).await;
    let (_, second) = get(&c, &format!("{base}{path}")).await;
    let form = resolve_form(&first, job, "order-9", "failed", "customer gave up");
    c.post(format!("{base}/op/resolve"))
        .form(&form)
        .send()
        .await
        .unwrap();
    let (_, _) = get(&c, &format!("{base}{path}")).await; // takes the flash
    let before = ops::get(&store, job, "order-9").await.unwrap().record;
    assert_eq!(before.state, State::Failed);

    // The second tab's form is refused and says what happened instead.
    let form = resolve_form(&second, job, "order-9", "queued", "send it again");
    let res = c
        .post(format!("{base}/op/resolve"))
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303);
    let (_, after) = get(&c, &format!("{base}{path}")).await;
    assert!(
        after.contains("Nothing was changed: this operation moved since you looked"),
        "{after}"
    );
    assert!(after.contains("it is now failed"), "{after}");
    let now = ops::get(&store, job, "order-9").await.unwrap().record;
    assert_eq!(now, before, "the row is as the first tab left it");
    let resolved = store
        .op_history(job, "order-9")
        .await
        .unwrap()
        .iter()
        .filter(|e| e.event == AuditKind::Resolved)
        .count();
    assert_eq!(resolved, 1);

    // A cancel fenced the same way: the page showed it queued, a worker
    // claimed it meanwhile.
    let payload = Payload::none();
    ops::enqueue(&store, job, "order-10", &payload, None)
        .await
        .unwrap();
    let path = op_path(job, "order-10");
    let (_, page) = get(&c, &format!("{base}{path}")).await;
    assert!(page.contains("id=\"cancel-form\""), "{page}");
    let claimed = dead_claim(&store, job, "order-10", &payload).await;
    post_cancel(&c, &base, &page, job, "order-10").await;
    let (_, after) = get(&c, &format!("{base}{path}")).await;
    assert!(after.contains("moved since you looked"), "{after}");
    let now = ops::get(&store, job, "order-10").await.unwrap().record;
    assert_eq!(
        (now.state, now.token, now.cancel_requested),
        (State::Claimed, claimed, false)
    );
    // Looked at again, the cancel goes through as a request to the owner.
    let (_, page) = get(&c, &format!("{base}{path}")).await;
    post_cancel(&c, &base, &page, job, "order-10").await;
    let now = ops::get(&store, job, "order-10").await.unwrap().record;
    assert!(now.cancel_requested);
    let last = store.op_history(job, "order-10").await.unwrap();
    assert_eq!(last.last().unwrap().actor, "alice (console)");
}

async fn csrf_and_origin_are_checked<S: OperatorStore + Clone>(url: &str, store: S) {
    let job = "send_receipt";
    held(&store, job, "order-3").await;
    let base = serve(store.clone(), options(url)).await;
    let c = logged_in(&base, "alice", Some(TOKEN)).await;
    let (_, page) = get(&c, &format!("{base}{}", op_path(job, "order-3"))).await;
    let before = ops::get(&store, job, "order-3").await.unwrap().record;

    let mut form = resolve_form(&page, job, "order-3", "queued", "x");
    form.retain(|(k, _)| k != "csrf");
    form.push(("csrf".into(), "0".repeat(64)));
    let res = c
        .post(format!("{base}/op/resolve"))
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403, "a wrong CSRF token");
    assert!(res.text().await.unwrap().contains("CSRF check failed"));

    // Another session's page: its token is not this session's.
    let other = logged_in(&base, "bob", Some(TOKEN)).await;
    let (_, bobs) = get(&other, &format!("{base}{}", op_path(job, "order-3"))).await;
    let form = resolve_form(&bobs, job, "order-3", "queued", "x");
    let res = c
        .post(format!("{base}/op/resolve"))
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403, "bob's form in alice's session");

    // The right token, sent by a page of another site.
    let form = resolve_form(&page, job, "order-3", "queued", "x");
    let res = c
        .post(format!("{base}/op/resolve"))
        .header("origin", "http://evil.example")
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403, "a cross-site POST");

    // No session at all.
    let res = client()
        .post(format!("{base}/op/resolve"))
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);

    assert_eq!(
        ops::get(&store, job, "order-3").await.unwrap().record,
        before
    );
    // The cookie is HttpOnly and SameSite=Strict.
    let res = client()
        .post(format!("{base}/login"))
        .form(&[("name", "carol"), ("token", TOKEN), ("next", "/")])
        .send()
        .await
        .unwrap();
    let cookie = res.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
}

async fn read_only_changes_nothing<S: OperatorStore + Clone>(url: &str, store: S) {
    let job = "send_receipt";
    held(&store, job, "order-4").await;
    let mut o = options(url);
    o.read_only = true;
    let base = serve(store.clone(), o).await;
    let c = logged_in(&base, "alice", Some(TOKEN)).await;
    let (_, page) = get(&c, &format!("{base}{}", op_path(job, "order-4"))).await;
    assert!(page.contains("read-only"), "{page}");
    assert!(!page.contains("id=\"resolve-form\""), "{page}");
    let form = [
        ("job", job),
        ("key", "order-4"),
        ("state", "held"),
        ("token", "2"),
        ("csrf", &field(&page, "csrf")),
        ("as", "queued"),
        ("reason", "x"),
    ];
    let res = c
        .post(format!("{base}/op/resolve"))
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    assert!(res.text().await.unwrap().contains("read-only"));
    assert_eq!(
        ops::get(&store, job, "order-4").await.unwrap().record.state,
        State::Held
    );
}

async fn ugly_keys_render_as_text<S: OperatorStore + Clone>(url: &str, store: S) {
    let job = "send_receipt";
    let script = "<script>alert('key')</script>";
    let long = format!("Grüße-日本-{}", "x".repeat(480));
    let payload = Payload::parse(r#"{"html":"<img src=x onerror=alert(1)>"}"#).unwrap();
    held_with(&store, job, script, &payload).await;
    held(&store, job, &long).await;
    let base = serve(store, options(url)).await;
    let c = logged_in(&base, "Zoë <b>", Some(TOKEN)).await;
    let (_, list) = get(&c, &format!("{base}/held")).await;
    assert!(!list.contains("<script>alert"), "{list}");
    assert!(
        list.contains("&#60;script&#62;alert(&#39;key&#39;)&#60;/script&#62;"),
        "{list}"
    );
    assert!(list.contains("Grüße-日本-xxxx"), "non-ASCII shown as is");
    assert!(
        list.contains("Zoë &#60;b&#62;"),
        "the operator's name is escaped too"
    );
    let (status, page) = get(&c, &format!("{base}{}", op_path(job, script))).await;
    assert_eq!(status, 200);
    assert!(
        !page.contains("<script>") && !page.contains("<img src=x"),
        "{page}"
    );
    assert!(
        page.contains("&#60;img src=x onerror=alert(1)&#62;"),
        "{page}"
    );
    let (status, page) = get(&c, &format!("{base}{}", op_path(job, &long))).await;
    assert_eq!(status, 200);
    assert!(page.contains(&long), "the whole key on its own page");
}

async fn no_secrets_on_pages<S: OperatorStore + Clone>(store: S) {
    let base = serve(
        store,
        options("postgres://app:hunter2-secret@db.internal/app"),
    )
    .await;
    let (_, login) = get(&client(), &format!("{base}/")).await;
    let c = logged_in(&base, "alice", Some(TOKEN)).await;
    let (_, overview) = get(&c, &format!("{base}/")).await;
    for page in [login, overview] {
        assert!(!page.contains("hunter2"), "{page}");
        assert!(!page.contains(TOKEN));
        assert!(page.contains("app:***@db.internal"), "{page}");
    }
}

async fn stuck_lists_page_and_filter<S: OperatorStore + Clone>(url: &str, store: S) {
    let payload = Payload::none();
    for i in 0..5 {
        dead_claim(&store, "sync_crm", &format!("stuck-{i}"), &payload).await;
    }
    dead_claim(&store, "charge_card", "stuck-card", &payload).await;
    let mut o = options(url);
    o.page_size = 2;
    let base = serve(store, o).await;
    let c = logged_in(&base, "alice", Some(TOKEN)).await;
    let (_, overview) = get(&c, &format!("{base}/")).await;
    assert!(
        overview.contains("<b>6</b><span>stuck claims"),
        "{overview}"
    );

    let mut seen = Vec::new();
    let mut next = Some("/stuck?job=sync_crm".to_owned());
    while let Some(path) = next {
        let (status, page) = get(&c, &format!("{base}{path}")).await;
        assert_eq!(status, 200, "{page}");
        assert!(page.contains("5 stuck of job type sync_crm"), "{page}");
        let rows: Vec<String> = (0..5)
            .map(|i| format!("stuck-{i}"))
            .filter(|k| page.contains(&format!(">{k}<")))
            .collect();
        assert!(rows.len() <= 2, "a page holds at most 2: {rows:?}");
        assert!(
            !page.contains("stuck-card"),
            "the filter keeps other job types out"
        );
        seen.extend(rows);
        next = page
            .split("id=\"next\"")
            .next()
            .filter(|_| page.contains("id=\"next\""))
            .and_then(|before| before.rsplit("href=\"").next())
            .map(|href| href.trim_end_matches("\" ").replace("&#38;", "&"));
    }
    let want: Vec<String> = (0..5).map(|i| format!("stuck-{i}")).collect();
    assert_eq!(
        seen, want,
        "every stuck claim once, oldest first, over three pages"
    );
    let (_, all) = get(&c, &format!("{base}/stuck")).await;
    assert!(all.contains("6 stuck,"), "{all}");
}

async fn cancel_withdraws_a_completed_operation<S: OperatorStore + Clone>(url: &str, store: S) {
    use onceonly::{EffectKind, Guard, JobSpec};
    use onceonly_http::test_server::{Mode, TestServer};
    let server = TestServer::start(Mode::Keyed).await.unwrap();
    let destination =
        onceonly_http::HttpDestination::new(&server.base_url(), std::time::Duration::from_secs(5))
            .unwrap();
    let job = "send_invite";
    let guard = Guard::new(store.clone(), JobSpec::new(job, EffectKind::Keyed)).unwrap();
    let payload = Payload::parse(r#"{"to":"b@example.com"}"#).unwrap();
    guard.run("invite-1", &payload, &destination).await.unwrap();
    let done = ops::get(&store, job, "invite-1").await.unwrap().record;
    assert_eq!(done.state, State::Completed);
    assert_eq!(server.live("send_invite:invite-1"), 1);

    // Without a destination the page offers no cancel for it.
    let base = serve(store.clone(), options(url)).await;
    let c = logged_in(&base, "alice", Some(TOKEN)).await;
    let (_, page) = get(&c, &format!("{base}{}", op_path(job, "invite-1"))).await;
    assert!(!page.contains("id=\"cancel-form\""), "{page}");
    assert!(page.contains("needs a destination"), "{page}");

    let mut o = options(url);
    o.destination = Some(destination);
    let base = serve(store.clone(), o).await;
    let c = logged_in(&base, "alice", Some(TOKEN)).await;
    let path = op_path(job, "invite-1");
    let (_, page) = get(&c, &format!("{base}{path}")).await;
    let status = post_cancel(&c, &base, &page, job, "invite-1").await;
    assert_eq!(status, 303);
    let (_, after) = get(&c, &format!("{base}{path}")).await;
    assert!(after.contains("withdrawn at the destination"), "{after}");
    assert_eq!(server.live("send_invite:invite-1"), 0, "the item is gone");
    let now = ops::get(&store, job, "invite-1").await.unwrap().record;
    assert_eq!(now.state, State::Cancelled);
    let last = store.op_history(job, "invite-1").await.unwrap();
    let last = last.last().unwrap();
    assert_eq!(
        (last.event, last.actor.as_str()),
        (AuditKind::Cancelled, "alice (console)")
    );
}

/// A queued operation released after an unknown outcome under
/// at-least-once (`key`), with its item live: the earlier claim did send it.
async fn released_after_sending<S: OperatorStore + Clone>(
    store: &S,
    server: &onceonly_http::test_server::TestServer,
    key: &str,
) -> onceonly::Record {
    use onceonly::{EffectKind, Guard, JobSpec, Outcome, StalePolicy};
    let timeout = std::time::Duration::from_secs(5);
    let dest = onceonly_http::HttpDestination::new(&server.base_url(), timeout).unwrap();
    let job = "send_reminder";
    let spec = JobSpec::new(job, EffectKind::Opaque(StalePolicy::AtLeastOnce));
    let guard = Guard::new(store.clone(), spec).unwrap();
    server.unknown_after_create(1);
    let outcome = guard.run(key, &Payload::none(), &dest).await.unwrap();
    assert!(matches!(outcome, Outcome::RetryLater { .. }), "{outcome:?}");
    let released = ops::get(store, job, key).await.unwrap().record;
    assert_eq!((released.state, released.attempts), (State::Queued, 1));
    assert_eq!(server.live(&format!("{job}:{key}")), 1);
    released
}

/// A queued operation that may have been sent, cancelled through a
/// destination that can look it up: the item is withdrawn and the
/// operation cancelled.
async fn cancel_after_a_claim_looks_at_the_destination<S: OperatorStore + Clone>(
    url: &str,
    store: S,
) {
    use onceonly_http::test_server::{Mode, TestServer};
    use onceonly_http::HttpDestination;
    let timeout = std::time::Duration::from_secs(5);
    let server = TestServer::start(Mode::Searchable).await.unwrap();
    let job = "send_reminder";
    released_after_sending(&store, &server, "remind-1").await;
    let path = op_path(job, "remind-1");

    let mut o = options(url);
    o.destination = Some(HttpDestination::new(&server.base_url(), timeout).unwrap());
    let base = serve(store.clone(), o).await;
    let c = logged_in(&base, "alice", Some(TOKEN)).await;
    let (_, page) = get(&c, &format!("{base}{path}")).await;
    assert!(
        page.contains("looks it up at the destination first"),
        "{page}"
    );
    let status = post_cancel(&c, &base, &page, job, "remind-1").await;
    assert_eq!(status, 303);
    let (_, after) = get(&c, &format!("{base}{path}")).await;
    assert!(after.contains("withdrawn at the destination"), "{after}");
    assert_eq!(server.live("send_reminder:remind-1"), 0, "the item is gone");
    let now = ops::get(&store, job, "remind-1").await.unwrap().record;
    assert_eq!(now.state, State::Cancelled);
}

/// The same, when the console cannot look it up (no destination, or one
/// that cannot look up): the page says the cancel holds it, and the cancel
/// holds it for a person (its retry stopped, the item left as it is), says
/// so, and records who did it and why.
async fn cancel_without_a_lookup_holds_a_queued_operation<S: OperatorStore + Clone>(
    url: &str,
    store: S,
) {
    use onceonly_http::test_server::{Mode, TestServer};
    use onceonly_http::HttpDestination;
    let timeout = std::time::Duration::from_secs(5);
    let server = TestServer::start(Mode::Searchable).await.unwrap();
    let blind_server = TestServer::start(Mode::Neither).await.unwrap();
    let blind = HttpDestination::new(&blind_server.base_url(), timeout).unwrap();
    let job = "send_reminder";
    for (key, destination, why) in [
        ("remind-2", None, "no destination was given to look it up"),
        (
            "remind-3",
            Some(blind),
            "the destination could not look it up",
        ),
    ] {
        let released = released_after_sending(&store, &server, key).await;
        let path = op_path(job, key);
        let mut o = options(url);
        o.destination = destination;
        let base = serve(store.clone(), o).await;
        let c = logged_in(&base, "alice", Some(TOKEN)).await;
        let (_, page) = get(&c, &format!("{base}{path}")).await;
        assert!(page.contains("may have been sent"), "{page}");
        let status = post_cancel(&c, &base, &page, job, key).await;
        assert_eq!(status, 303);
        let (_, after) = get(&c, &format!("{base}{path}")).await;
        assert!(
            after.contains("Held by alice (console), not cancelled")
                && after.contains("its retry is stopped"),
            "{after}"
        );
        let now = ops::get(&store, job, key).await.unwrap().record;
        assert_eq!(
            (now.state, now.token, now.attempts),
            (State::Held, released.token, 1),
            "held, under the token read"
        );
        assert_eq!(server.live(&format!("{job}:{key}")), 1, "nothing withdrawn");
        let history = store.op_history(job, key).await.unwrap();
        let last = history.last().unwrap();
        assert_eq!(
            (
                last.event,
                last.actor.as_str(),
                last.from_state,
                last.to_state
            ),
            (
                AuditKind::Hold,
                "alice (console)",
                Some(State::Queued),
                Some(State::Held)
            )
        );
        let detail = last.detail.as_deref().unwrap_or_default();
        assert!(detail.contains(why), "{detail}");
        // The person checked the destination and resolves it.
        let resolution = ops::Resolution::Cancelled;
        let token = Some(released.token);
        let done = ops::resolve(&store, job, key, &resolution, "withdrawn by hand", token).await;
        assert_eq!(done.unwrap().state, State::Cancelled);
    }
}

/// A guarded job released for a retry: the operation page's history shows
/// the retry with its attempt, reason and when it is due again, and the
/// overview counts it.
async fn retries_on_the_page<S: OperatorStore + Clone>(url: &str, store: S) {
    let job = "send_invoice";
    let mut spec = JobSpec::new(job, EffectKind::Keyed);
    spec.max_retries = 0;
    let worker = Guard::new(store.clone(), spec)
        .unwrap()
        .with_owner("worker-1");
    let refused =
        EffectFn(|_ctx: EffectCtx| async { EffectOutcome::NotSent("connection refused".into()) });
    let payload = Payload::parse(r#"{"invoice": 3}"#).unwrap();
    let outcome = worker.run("inv-3", &payload, &refused).await.unwrap();
    assert!(matches!(outcome, Outcome::RetryLater { .. }), "{outcome:?}");

    let base = serve(store, options(url)).await;
    let c = logged_in(&base, "alice", Some(TOKEN)).await;
    let (status, page) = get(&c, &format!("{base}{}", op_path(job, "inv-3"))).await;
    assert_eq!(status, 200, "{page}");
    let history = &page[page.find("id=\"history\"").expect("the history section")..];
    let history = &history[..history.find("</table>").unwrap()];
    for want in [
        "<td>retry</td>",
        "worker-1",
        "claimed → queued",
        "attempt 1: connection refused (due again at ",
    ] {
        assert!(history.contains(want), "{want}: {history}");
    }
    let (_, overview) = get(&c, &format!("{base}/")).await;
    assert!(
        overview.contains("<td>retries</td><td>1</td>"),
        "{overview}"
    );
}

async fn all<S: OperatorStore + Clone>(url: &str, store: S) {
    retries_on_the_page(url, store.clone()).await;
    stuck_lists_page_and_filter(url, store.clone()).await;
    cancel_withdraws_a_completed_operation(url, store.clone()).await;
    cancel_after_a_claim_looks_at_the_destination(url, store.clone()).await;
    cancel_without_a_lookup_holds_a_queued_operation(url, store.clone()).await;
    pages_need_a_login(url, store.clone()).await;
    resolve_from_the_page(url, store.clone()).await;
    a_stale_form_changes_nothing(url, store.clone()).await;
    csrf_and_origin_are_checked(url, store.clone()).await;
    read_only_changes_nothing(url, store.clone()).await;
    ugly_keys_render_as_text(url, store.clone()).await;
    no_secrets_on_pages(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_over_http_on_sqlite() {
    let (url, store) = sqlite().await;
    all(&url, store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_over_http_on_postgres() {
    let Some((url, store)) = postgres("console_over_http_on_postgres").await else {
        return;
    };
    all(&url, store).await;
}

#[test]
fn beyond_loopback_needs_a_token() {
    let anywhere: SocketAddr = "0.0.0.0:8090".parse().unwrap();
    let loopback: SocketAddr = "127.0.0.1:8090".parse().unwrap();
    let open = Options::new("sqlite://x.db");
    let err = check_listen(anywhere, &open).unwrap_err().to_string();
    assert!(err.contains("without a token"), "{err}");
    assert!(check_listen(loopback, &open).is_ok());
    assert!(check_listen("[::1]:8090".parse().unwrap(), &open).is_ok());
    let mut with = open.clone();
    with.token = Some(TOKEN.into());
    assert!(check_listen(anywhere, &with).is_ok());
    with.token = Some("short".into());
    assert!(check_listen(loopback, &with).is_err(), "a short token");
}

#[tokio::test]
async fn without_a_token_a_name_is_enough_on_loopback() {
    let (url, store) = sqlite().await;
    let base = serve(store, Options::new(&url)).await;
    let (status, login) = get(&client(), &format!("{base}/held")).await;
    assert_eq!(status, 401);
    assert!(!login.contains("name=\"token\""), "{login}");
    let c = logged_in(&base, "alice", None).await;
    assert_eq!(get(&c, &format!("{base}/held")).await.0, 200);
    // An empty name is refused: it goes into the audit trail.
    let res = client()
        .post(format!("{base}/login"))
        .form(&[("name", "  "), ("next", "/")])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
}
