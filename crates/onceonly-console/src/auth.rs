//! Who is at the console. A person logs in with a name (recorded in the
//! audit trail for every action) and, when one is configured, the token; the
//! session lives in an HttpOnly, SameSite=Strict cookie, never in a URL.
//! Every form carries the session's CSRF token, checked on POST, and a POST
//! whose Origin is another site is refused.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use askama::Template;
use axum::extract::{Form, FromRequestParts, Query, State};
use axum::http::header::{COOKIE, HOST, ORIGIN, RETRY_AFTER, SET_COOKIE};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Redirect, Response};
use onceonly::operator::OperatorStore;
use rand::RngCore;
use serde::Deserialize;
use subtle::ConstantTimeEq;

use crate::error::ConsoleError;
use crate::throttle::Client;
use crate::Shared;

const COOKIE_NAME: &str = "onceonly_console";
const SESSION_LIFETIME: Duration = Duration::from_secs(12 * 3600);
const MAX_NAME_CHARS: usize = 64;

/// A message for the next page the person sees (after a redirect).
#[derive(Debug, Clone)]
pub(crate) struct Flash {
    /// `done` or `refused`: how the page colours it.
    pub kind: &'static str,
    pub text: String,
}

#[derive(Debug, Clone)]
struct Session {
    operator: String,
    csrf: String,
    flash: Option<Flash>,
    expires: Instant,
}

/// The logged-in sessions, by the random id in their cookie.
#[derive(Default)]
pub(crate) struct Sessions(Mutex<HashMap<String, Session>>);

impl Sessions {
    fn create(&self, operator: String) -> String {
        let id = random_hex();
        let session = Session {
            operator,
            csrf: random_hex(),
            flash: None,
            expires: Instant::now() + SESSION_LIFETIME,
        };
        let mut all = self.0.lock().expect("sessions lock");
        all.retain(|_, s| s.expires > Instant::now());
        all.insert(id.clone(), session);
        id
    }

    fn get(&self, id: &str) -> Option<Session> {
        let all = self.0.lock().expect("sessions lock");
        all.get(id).filter(|s| s.expires > Instant::now()).cloned()
    }

    fn remove(&self, id: &str) {
        self.0.lock().expect("sessions lock").remove(id);
    }

    /// Leaves `flash` for the session's next page.
    pub fn flash(&self, id: &str, flash: Flash) {
        if let Some(s) = self.0.lock().expect("sessions lock").get_mut(id) {
            s.flash = Some(flash);
        }
    }

    fn take_flash(&self, id: &str) -> Option<Flash> {
        self.0
            .lock()
            .expect("sessions lock")
            .get_mut(id)
            .and_then(|s| s.flash.take())
    }
}

fn random_hex() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    hex::encode(bytes)
}

/// A logged-in person; a handler taking it answers 401 with the login form
/// to anyone else.
#[derive(Debug, Clone)]
pub(crate) struct Operator {
    pub session: String,
    pub name: String,
    pub csrf: String,
    pub flash: Option<Flash>,
}

impl Operator {
    /// Refuses a form whose CSRF token is not this session's.
    pub fn check_csrf(&self, offered: &str) -> Result<(), ConsoleError> {
        if bool::from(offered.as_bytes().ct_eq(self.csrf.as_bytes())) {
            Ok(())
        } else {
            Err(ConsoleError::Forbidden(
                "this form is not from this session (CSRF check failed); nothing was changed. \
                 Reload the page and try again"
                    .into(),
            ))
        }
    }

    /// The actor written to the audit trail.
    pub fn actor(&self) -> String {
        format!("{} (console)", self.name)
    }
}

fn session_cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE_NAME)
        .map(|(_, value)| value)
}

/// The login page, answering a request without a session.
pub(crate) struct LoginRequired(Response);

impl IntoResponse for LoginRequired {
    fn into_response(self) -> Response {
        self.0
    }
}

impl<S: OperatorStore> FromRequestParts<Shared<S>> for Operator {
    type Rejection = LoginRequired;

    async fn from_request_parts(
        parts: &mut Parts,
        app: &Shared<S>,
    ) -> Result<Self, Self::Rejection> {
        let found = session_cookie(&parts.headers)
            .and_then(|id| app.sessions.get(id).map(|s| (id.to_owned(), s)));
        match found {
            Some((id, s)) => Ok(Operator {
                flash: app.sessions.take_flash(&id),
                session: id,
                name: s.operator,
                csrf: s.csrf,
            }),
            None => {
                let next = parts
                    .uri
                    .path_and_query()
                    .map_or("/".to_owned(), |p| p.to_string());
                let next = if parts.method == axum::http::Method::GET {
                    next
                } else {
                    "/".to_owned()
                };
                Err(LoginRequired(login_response(
                    app,
                    StatusCode::UNAUTHORIZED,
                    &next,
                    None,
                )))
            }
        }
    }
}

#[derive(Template)]
#[template(path = "login.html")]
struct LoginPage<'a> {
    needs_token: bool,
    next: &'a str,
    error: Option<&'a str>,
    database: &'a str,
}

fn login_response<S>(
    app: &Shared<S>,
    status: StatusCode,
    next: &str,
    error: Option<&str>,
) -> Response {
    let page = LoginPage {
        needs_token: app.options.token.is_some(),
        next,
        error,
        database: &app.options.database,
    };
    match page.render() {
        Ok(html) => (status, Html(html)).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

#[derive(Deserialize)]
pub(crate) struct NextQuery {
    next: Option<String>,
}

/// GET /login
pub(crate) async fn login_page<S: OperatorStore>(
    State(app): State<Shared<S>>,
    Query(q): Query<NextQuery>,
) -> Response {
    let next = safe_next(q.next.as_deref());
    login_response(&app, StatusCode::OK, next, None)
}

#[derive(Deserialize)]
pub(crate) struct LoginForm {
    name: String,
    #[serde(default)]
    token: String,
    #[serde(default)]
    next: String,
}

/// Only a path of this site, so a crafted login link cannot send the
/// person elsewhere.
fn safe_next(next: Option<&str>) -> &str {
    match next {
        Some(n) if n.starts_with('/') && !n.starts_with("//") && !n.contains('\\') => n,
        _ => "/",
    }
}

/// Refuses a POST sent by a page of another site (the Origin header, which
/// browsers send with every POST, names it).
pub(crate) fn same_origin(headers: &HeaderMap) -> Result<(), ConsoleError> {
    let Some(origin) = headers.get(ORIGIN).and_then(|v| v.to_str().ok()) else {
        return Ok(());
    };
    let host = headers.get(HOST).and_then(|v| v.to_str().ok());
    let origin_host = url::Url::parse(origin).ok().map(|u| match u.port() {
        Some(p) => format!("{}:{p}", u.host_str().unwrap_or_default()),
        None => u.host_str().unwrap_or_default().to_owned(),
    });
    if host.is_some() && origin_host.as_deref() == host {
        Ok(())
    } else {
        tracing::warn!(origin, "console: refused a POST from another origin");
        Err(ConsoleError::Forbidden(
            "this form was sent from another site; nothing was changed".into(),
        ))
    }
}

/// POST /login
pub(crate) async fn login<S: OperatorStore>(
    State(app): State<Shared<S>>,
    client: Client,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Response {
    if let Err(e) = same_origin(&headers) {
        return e.into_response();
    }
    let next = safe_next(Some(&form.next));
    let name = form.name.trim();
    let refuse = |why: &str| login_response(&app, StatusCode::UNAUTHORIZED, next, Some(why));
    if name.is_empty() {
        return refuse("say who you are: your name goes into the audit trail of every action");
    }
    if name.chars().count() > MAX_NAME_CHARS || name.chars().any(char::is_control) {
        return refuse("a name is at most 64 characters, without control characters");
    }
    if let Some(token) = &app.options.token {
        let attempt = match app.throttle.attempt(client, Instant::now()) {
            Ok(attempt) => attempt,
            // While the client waits, no token is even compared.
            Err(wait) => {
                let secs = wait.as_secs_f64().ceil() as u64;
                tracing::warn!(operator = name, %client, retry_after = secs, "console login refused: too many wrong tokens from this address");
                let why = format!("too many wrong tokens from your address: try again in {secs} s");
                let mut page =
                    login_response(&app, StatusCode::TOO_MANY_REQUESTS, next, Some(&why));
                page.headers_mut().insert(RETRY_AFTER, secs.into());
                return page;
            }
        };
        if !bool::from(form.token.as_bytes().ct_eq(token.as_bytes())) {
            tracing::warn!(operator = name, %client, attempt, "console login refused: wrong token");
            return refuse("wrong token");
        }
        app.throttle.succeeded(client);
    }
    let id = app.sessions.create(name.to_owned());
    tracing::info!(operator = name, %client, "console login");
    let cookie = format!(
        "{COOKIE_NAME}={id}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}",
        SESSION_LIFETIME.as_secs()
    );
    ([(SET_COOKIE, cookie)], Redirect::to(next)).into_response()
}

#[derive(Deserialize)]
pub(crate) struct LogoutForm {
    csrf: String,
}

/// POST /logout
pub(crate) async fn logout<S: OperatorStore>(
    State(app): State<Shared<S>>,
    op: Operator,
    headers: HeaderMap,
    Form(form): Form<LogoutForm>,
) -> Result<Response, ConsoleError> {
    same_origin(&headers)?;
    op.check_csrf(&form.csrf)?;
    app.sessions.remove(&op.session);
    let cookie = format!("{COOKIE_NAME}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0");
    Ok(([(SET_COOKIE, cookie)], Redirect::to("/login")).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_stays_on_this_site() {
        assert_eq!(safe_next(Some("/held?job=a")), "/held?job=a");
        assert_eq!(safe_next(Some("//evil.example/")), "/");
        assert_eq!(safe_next(Some("https://evil.example/")), "/");
        assert_eq!(safe_next(Some("/\\evil.example")), "/");
        assert_eq!(safe_next(None), "/");
    }

    #[test]
    fn origin_must_match_host() {
        let mut h = HeaderMap::new();
        h.insert(HOST, "127.0.0.1:8090".parse().unwrap());
        assert!(same_origin(&h).is_ok(), "no Origin: a non-browser client");
        h.insert(ORIGIN, "http://127.0.0.1:8090".parse().unwrap());
        assert!(same_origin(&h).is_ok());
        h.insert(ORIGIN, "http://evil.example".parse().unwrap());
        assert!(same_origin(&h).is_err());
    }
}
