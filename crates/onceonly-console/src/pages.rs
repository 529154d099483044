//! The pages: the overview, the held and stuck lists, one operation.

use askama::Template;
use axum::extract::{Query, State};
use axum::response::Html;
use onceonly::operator::{self, OperatorStore, Which};
use onceonly::protocol::unclaimed_may_have_acted;
use onceonly::{AuditKind, Error, State as OpState};
use serde::Deserialize;

use crate::auth::Operator;
use crate::error::ConsoleError;
use crate::filters;
use crate::view::{age, download_link, query, time, Chrome, Excerpt, Row};
use crate::Shared;

type Page = Result<Html<String>, ConsoleError>;

fn render(t: impl Template) -> Page {
    t.render()
        .map(Html)
        .map_err(|e| ConsoleError::Io(std::io::Error::other(e)))
}

fn chrome<S>(app: &Shared<S>, op: Operator) -> Chrome {
    Chrome::new(op, app.options.read_only, &app.options.database)
}

/// One job type's line of the overview.
struct JobLine {
    job: String,
    held_link: String,
    stuck_link: String,
    queued: i64,
    claimed: i64,
    stuck: i64,
    held: i64,
    completed: i64,
    failed: i64,
    cancelled: i64,
}

/// One rate: how many within the window, and per minute.
struct Rate {
    name: &'static str,
    count: i64,
    per_minute: String,
}

#[derive(Template)]
#[template(path = "overview.html")]
struct OverviewPage {
    chrome: Chrome,
    window: String,
    now: String,
    held: i64,
    stuck: i64,
    oldest_held: String,
    jobs: Vec<JobLine>,
    rates: Vec<Rate>,
}

/// GET /
pub(crate) async fn overview<S: OperatorStore>(State(app): State<Shared<S>>, op: Operator) -> Page {
    let o = operator::overview(&app.store, app.options.window).await?;
    let jobs = o
        .job_types()
        .into_iter()
        .map(|job| JobLine {
            held_link: format!("/held?{}", query(&[("job", &job)])),
            stuck_link: format!("/stuck?{}", query(&[("job", &job)])),
            queued: o.count(&job, OpState::Queued),
            claimed: o.count(&job, OpState::Claimed),
            stuck: o.stuck_of(&job),
            held: o.count(&job, OpState::Held),
            completed: o.count(&job, OpState::Completed),
            failed: o.count(&job, OpState::Failed),
            cancelled: o.count(&job, OpState::Cancelled),
            job,
        })
        .collect::<Vec<_>>();
    let minutes = (o.window.as_secs_f64() / 60.0).max(1.0 / 60.0);
    let rate = |name, count: i64| Rate {
        name,
        count,
        per_minute: format!("{:.1}", count as f64 / minutes),
    };
    let finished = |state| jobs.iter().map(|j| j_state(j, state)).sum::<i64>();
    let mut rates = vec![
        rate("completed", finished(OpState::Completed)),
        rate("failed", finished(OpState::Failed)),
        rate("cancelled", finished(OpState::Cancelled)),
    ];
    for (name, kind) in [
        ("retries", AuditKind::Retry),
        ("take-overs", AuditKind::TakeOver),
        ("holds", AuditKind::Hold),
        ("lost claims", AuditKind::LostClaim),
        ("cancels requested", AuditKind::CancelRequested),
        ("compensated", AuditKind::Compensated),
        ("withdraws failed", AuditKind::WithdrawFailed),
        ("resolved by a person", AuditKind::Resolved),
    ] {
        rates.push(rate(name, o.events_of(kind)));
    }
    render(OverviewPage {
        chrome: chrome(&app, op),
        window: humantime::format_duration(o.window).to_string(),
        now: o.now.to_string(),
        held: o.held(),
        stuck: o.stuck(),
        oldest_held: o.oldest_held_age().map_or_else(|| "-".into(), age),
        jobs,
        rates,
    })
}

fn j_state(j: &JobLine, state: OpState) -> i64 {
    match state {
        OpState::Completed => j.completed,
        OpState::Failed => j.failed,
        OpState::Cancelled => j.cancelled,
        _ => 0,
    }
}

#[derive(Deserialize)]
pub(crate) struct ListQuery {
    job: Option<String>,
    page: Option<u64>,
}

#[derive(Template)]
#[template(path = "list.html")]
struct ListPage {
    chrome: Chrome,
    which: &'static str,
    title: &'static str,
    jobs: Vec<String>,
    job: String,
    total: i64,
    rows: Vec<Row>,
    page: u64,
    prev_link: Option<String>,
    next_link: Option<String>,
}

/// GET /held
pub(crate) async fn held<S: OperatorStore>(
    state: State<Shared<S>>,
    op: Operator,
    q: Query<ListQuery>,
) -> Page {
    list(state, op, q, Which::Held).await
}

/// GET /stuck
pub(crate) async fn stuck<S: OperatorStore>(
    state: State<Shared<S>>,
    op: Operator,
    q: Query<ListQuery>,
) -> Page {
    list(state, op, q, Which::Stuck).await
}

async fn list<S: OperatorStore>(
    State(app): State<Shared<S>>,
    op: Operator,
    Query(q): Query<ListQuery>,
    which: Which,
) -> Page {
    let job = q.job.filter(|j| !j.is_empty());
    let page = q.page.unwrap_or(1).max(1);
    let size = app.options.page_size;
    let offset = (page - 1).saturating_mul(u64::from(size));
    // One row past the page says whether there is a next one.
    let ((mut records, now), live) = tokio::try_join!(
        operator::list(&app.store, which, job.as_deref(), Some(size + 1), offset),
        app.store.op_counts_live(),
    )?;
    let more = records.len() > size as usize;
    records.truncate(size as usize);
    let mut jobs: Vec<String> = live.iter().map(|c| c.job_type.clone()).collect();
    jobs.dedup();
    let total = live
        .iter()
        .filter(|c| job.as_deref().is_none_or(|j| j == c.job_type))
        .map(|c| match which {
            Which::Held if c.state == OpState::Held => c.count,
            Which::Stuck => c.stuck,
            _ => 0,
        })
        .sum();
    let job = job.unwrap_or_default();
    let link = |p: u64| {
        let p = p.to_string();
        format!(
            "/{}?{}",
            which.as_str(),
            query(&[("job", &job), ("page", &p)])
        )
    };
    render(ListPage {
        chrome: chrome(&app, op),
        which: which.as_str(),
        title: match which {
            Which::Held => "Held: waiting for a person",
            Which::Stuck => "Stuck: claimed, lease over, not yet settled",
        },
        jobs,
        total,
        rows: records.iter().map(|r| Row::new(r, now)).collect(),
        page,
        prev_link: (page > 1).then(|| link(page - 1)),
        next_link: more.then(|| link(page + 1)),
        job,
    })
}

#[derive(Deserialize)]
pub(crate) struct OpQuery {
    job: String,
    key: String,
}

/// One audit event, as a row.
struct EventLine {
    at: String,
    event: String,
    actor: String,
    token: i64,
    change: String,
    detail: String,
}

#[derive(Template)]
#[template(path = "operation.html")]
struct OperationPage {
    chrome: Chrome,
    job: String,
    key: String,
    state: String,
    token: i64,
    attempts: i64,
    owner: String,
    external_ref: Excerpt,
    error: Excerpt,
    result: Excerpt,
    result_link: String,
    payload: Excerpt,
    payload_link: String,
    fingerprint: String,
    cancel_requested: bool,
    created_at: String,
    updated_at: String,
    claimed_at: String,
    lease_until: String,
    completed_at: String,
    age: String,
    history: Vec<EventLine>,
    can_resolve: bool,
    can_cancel: bool,
    cancel_note: String,
}

/// GET /op?job=J&key=K
pub(crate) async fn operation<S: OperatorStore>(
    State(app): State<Shared<S>>,
    op: Operator,
    Query(q): Query<OpQuery>,
) -> Page {
    let snap = match onceonly::ops::get(&app.store, &q.job, &q.key).await {
        Ok(snap) => snap,
        Err(e @ Error::NotFound { .. }) => {
            return Err(ConsoleError::NotFound(format!(
                "{e}: no record (purged, or never enqueued or claimed)"
            )))
        }
        Err(e) => return Err(e.into()),
    };
    let events = app.store.op_history(&q.job, &q.key).await?;
    let r = snap.record;
    let read_only = app.options.read_only;
    let has_destination = app.options.destination.is_some();
    let (can_cancel, cancel_note) = match r.state {
        OpState::Queued | OpState::Failed if !unclaimed_may_have_acted(r.attempts) => (
            true,
            "Cancels it: it was never claimed, so nothing was sent.".to_owned(),
        ),
        OpState::Queued | OpState::Failed if has_destination => (
            true,
            format!(
                "Claimed {} time(s) before, so it may have been sent: this looks it up at the \
                 destination first and withdraws what it finds, then cancels; if the withdraw \
                 fails nothing changes, and if it cannot look {}; this page says which.",
                r.attempts,
                if r.state == OpState::Queued {
                    "it is held (its retry stopped) for a person to resolve"
                } else {
                    "nothing changes"
                }
            ),
        ),
        OpState::Queued => (
            true,
            format!(
                "Claimed {} time(s) before, so it may have been sent, and there is no destination \
                 (--http) to look it up: this holds it instead of cancelling (its retry is \
                 stopped), for a person to check the destination and resolve it.",
                r.attempts
            ),
        ),
        OpState::Failed => (
            false,
            format!(
                "Claimed {} time(s) before, so it may have been sent: cancelling it needs a \
                 destination that can look it up (--http).",
                r.attempts
            ),
        ),
        OpState::Claimed => (
            true,
            "A worker holds the claim: this requests the cancel, and the owner stops before the \
             effect or withdraws it after."
                .to_owned(),
        ),
        OpState::Completed if has_destination && r.external_ref.is_some() => (
            true,
            "Withdraws the item at the destination first, then cancels; if the withdraw fails \
             it stays completed and this page says so."
                .to_owned(),
        ),
        OpState::Completed => (
            false,
            "Completed: cancelling it needs a destination to withdraw it from (--http) and an \
             external reference."
                .to_owned(),
        ),
        OpState::Held => (
            false,
            "Held: nobody knows whether the effect happened; resolve it first.".to_owned(),
        ),
        OpState::Cancelled => (false, "Cancelled: nothing left to do.".to_owned()),
    };
    let history = events
        .iter()
        .map(|e| EventLine {
            at: e.at.to_string(),
            event: e.event.as_str().to_owned(),
            actor: e.actor.clone(),
            token: e.token,
            change: format!(
                "{} → {}",
                e.from_state.map_or("-", OpState::as_str),
                e.to_state.map_or("-", OpState::as_str)
            ),
            detail: e.described(),
        })
        .collect();
    let text = |s: &Option<String>| s.clone().unwrap_or_else(|| "-".into());
    render(OperationPage {
        chrome: chrome(&app, op),
        state: r.state.as_str().to_owned(),
        token: r.token,
        attempts: r.attempts,
        owner: text(&r.owner),
        external_ref: Excerpt::of(r.external_ref.as_deref()),
        error: Excerpt::of(r.error.as_deref()),
        result: Excerpt::of(r.result.as_deref()),
        result_link: download_link("result", &r.job_type, &r.op_key),
        payload: Excerpt::of(r.payload.as_deref()),
        payload_link: download_link("payload", &r.job_type, &r.op_key),
        fingerprint: r.fingerprint.clone(),
        cancel_requested: r.cancel_requested,
        created_at: r.created_at.to_string(),
        updated_at: r.updated_at.to_string(),
        claimed_at: time(r.claimed_at),
        lease_until: time(r.lease_until),
        completed_at: time(r.completed_at),
        age: age(snap.now.since(operator::started(&r))),
        history,
        can_resolve: !read_only && r.state == OpState::Held,
        can_cancel: !read_only && can_cancel,
        cancel_note,
        job: r.job_type,
        key: r.op_key,
    })
}
