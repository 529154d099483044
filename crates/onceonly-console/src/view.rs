//! How records and times read on a page: links, ages, shortened keys, the
//! style sheet and the headers every response carries.

use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::http::{HeaderName, HeaderValue};
use axum::response::{IntoResponse, Response};
use onceonly::operator::{short_duration, started};
use onceonly::{DbTime, Record, State};

use crate::auth::{Flash, Operator};

/// Characters of a key or error shown in a list before it is cut (the
/// operation page shows it whole).
const LIST_CHARS: usize = 60;

/// The parts of every logged-in page: who, the CSRF token for its forms,
/// the mode, the message left by the last action.
pub(crate) struct Chrome {
    pub operator: String,
    pub csrf: String,
    pub read_only: bool,
    pub database: String,
    pub flash: Option<Flash>,
}

impl Chrome {
    pub fn new(op: Operator, read_only: bool, database: &str) -> Self {
        Self {
            operator: op.name,
            csrf: op.csrf,
            read_only,
            database: database.to_owned(),
            flash: op.flash,
        }
    }
}

/// The database as pages and log lines show it: its password masked by
/// [`onceonly::db_url::redact`], and its query options left out — one may
/// carry a password (`?password=`, `?sslpassword=`) and a page has no use
/// for them. A URL that does not parse shows up to its `?`, with anything
/// before an `@` masked.
pub(crate) fn database_shown(url: &str) -> String {
    let redacted = onceonly::db_url::redact(url);
    if let Ok(mut parsed) = url::Url::parse(&redacted) {
        parsed.set_query(None);
        parsed.set_fragment(None);
        return parsed.to_string();
    }
    let head = redacted.split(['?', '#']).next().unwrap_or_default();
    match (head.split_once("://"), head.rsplit_once('@')) {
        (Some((scheme, _)), Some((_, host))) => format!("{scheme}://***@{host}"),
        _ => head.to_owned(),
    }
}

/// `text` (an error from a connection the console made with the URL
/// itself) with the URL, whole or as `redact` prints it, replaced by
/// [`database_shown`]'s form.
pub(crate) fn without_url(text: &str, url: &str) -> String {
    let shown = database_shown(url);
    text.replace(url, &shown)
        .replace(&onceonly::db_url::redact(url), &shown)
}

/// A query string of `pairs`, percent-encoded.
pub(crate) fn query(pairs: &[(&str, &str)]) -> String {
    let mut q = url::form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs {
        q.append_pair(k, v);
    }
    q.finish()
}

/// The operation page's path.
pub(crate) fn op_link(job: &str, key: &str) -> String {
    format!("/op?{}", query(&[("job", job), ("key", key)]))
}

/// The path that downloads an operation's payload or result whole.
pub(crate) fn download_link(part: &str, job: &str, key: &str) -> String {
    format!("/op/{part}?{}", query(&[("job", job), ("key", key)]))
}

/// `text` cut to `LIST_CHARS` characters, with an ellipsis when cut.
pub(crate) fn cut(text: &str) -> String {
    if text.chars().count() <= LIST_CHARS {
        text.to_owned()
    } else {
        let mut s: String = text.chars().take(LIST_CHARS).collect();
        s.push('…');
        s
    }
}

/// Bytes of a payload, result, reference or error the operation page shows
/// before cutting it (the whole is a download away).
pub(crate) const PAGE_BYTES: usize = 64 * 1024;

/// A value of a record as the operation page shows it: whole when it fits
/// in [`PAGE_BYTES`], else its first bytes and a note giving its full size.
pub(crate) struct Excerpt {
    pub text: String,
    /// Set when cut: the value's full size, and how much is shown.
    pub note: Option<String>,
}

impl Excerpt {
    pub fn of(value: Option<&str>) -> Self {
        let Some(value) = value else {
            return Excerpt {
                text: "-".into(),
                note: None,
            };
        };
        if value.len() <= PAGE_BYTES {
            return Excerpt {
                text: value.to_owned(),
                note: None,
            };
        }
        let mut end = PAGE_BYTES;
        while !value.is_char_boundary(end) {
            end -= 1;
        }
        Excerpt {
            text: format!("{}…", &value[..end]),
            note: Some(format!(
                "{} bytes ({:.1} MiB) in all; the first {} KiB are shown.",
                value.len(),
                value.len() as f64 / (1024.0 * 1024.0),
                PAGE_BYTES / 1024
            )),
        }
    }
}

/// One record in a list.
pub(crate) struct Row {
    pub job: String,
    pub key: String,
    pub key_short: String,
    pub link: String,
    pub token: i64,
    pub attempts: i64,
    pub owner: String,
    pub age: String,
    pub lease: String,
    pub external_ref: String,
    pub error: String,
}

impl Row {
    pub fn new(r: &Record, now: DbTime) -> Self {
        let lease = match (r.state, r.claimed_at, r.lease_until) {
            (State::Claimed, Some(from), Some(until)) => format!(
                "{} (over by {})",
                age(until.since(from)),
                age(now.since(until))
            ),
            _ => "-".to_owned(),
        };
        Self {
            job: r.job_type.clone(),
            key: r.op_key.clone(),
            key_short: cut(&r.op_key),
            link: op_link(&r.job_type, &r.op_key),
            token: r.token,
            attempts: r.attempts,
            owner: r.owner.clone().unwrap_or_else(|| "-".into()),
            age: age(now.since(started(r))),
            lease,
            external_ref: cut(r.external_ref.as_deref().unwrap_or("-")),
            error: cut(r.error.as_deref().unwrap_or("")),
        }
    }
}

/// A duration as the CLI's tables show it.
pub(crate) fn age(d: std::time::Duration) -> String {
    short_duration(onceonly::operator::millis(d))
}

/// A time, or `-`.
pub(crate) fn time(t: Option<DbTime>) -> String {
    t.map_or_else(|| "-".to_owned(), |t| t.to_string())
}

/// GET /console.css: the one style sheet, kept in the binary.
pub(crate) async fn stylesheet() -> Response {
    (
        [
            (CONTENT_TYPE, "text/css; charset=utf-8"),
            (CACHE_CONTROL, "max-age=3600"),
        ],
        include_str!("../assets/console.css"),
    )
        .into_response()
}

/// Headers on every response: no script may run (there is none), no other
/// site may frame the pages, nothing is cached or sent to another site as
/// a referrer.
pub(crate) async fn security_headers(mut res: Response) -> Response {
    let h = res.headers_mut();
    let set = |h: &mut axum::http::HeaderMap, name: &'static str, value: &'static str| {
        h.insert(
            HeaderName::from_static(name),
            HeaderValue::from_static(value),
        );
    };
    set(
        h,
        "content-security-policy",
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; \
         frame-ancestors 'none'; base-uri 'none'",
    );
    set(h, "x-frame-options", "DENY");
    set(h, "x-content-type-options", "nosniff");
    // same-origin, not no-referrer: under no-referrer a browser sends
    // `Origin: null` with a form, and the Origin check could not tell
    // this site's forms from a sandboxed page's.
    set(h, "referrer-policy", "same-origin");
    if !h.contains_key(CACHE_CONTROL) {
        set(h, "cache-control", "no-store");
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_shown_hides_every_password() {
        for (url, shown) in [
            ("postgres://u:pw1@h:5432/db", "postgres://u:***@h:5432/db"),
            ("postgres://u@h/db?password=pw1", "postgres://u@h/db"),
            (
                "postgresql://u@h/db?sslmode=require&sslpassword=pw1",
                "postgresql://u@h/db",
            ),
            (
                "postgres://u:pw1@h/db?password=pw1#x",
                "postgres://u:***@h/db",
            ),
            ("sqlite://onceonly.db", "sqlite://onceonly.db"),
            ("sqlite:///var/lib/o.db?mode=rwc", "sqlite:///var/lib/o.db"),
            (
                "postgres://u:p w1@h h/db?password=pw1",
                "postgres://***@h h/db",
            ),
        ] {
            assert_eq!(database_shown(url), shown, "{url}");
        }
    }

    #[test]
    fn long_values_are_cut_on_a_character() {
        assert_eq!(Excerpt::of(None).text, "-");
        let short = Excerpt::of(Some("{}"));
        assert_eq!((short.text.as_str(), short.note), ("{}", None));
        let long = "é".repeat(PAGE_BYTES);
        let e = Excerpt::of(Some(&long));
        assert_eq!(e.text, format!("{}…", "é".repeat(PAGE_BYTES / 2)));
        let odd = format!("a{long}");
        let e = Excerpt::of(Some(&odd));
        assert!(e.text.len() < PAGE_BYTES + 4, "{}", e.text.len());
        assert!(e
            .note
            .unwrap()
            .starts_with(&format!("{} bytes (", odd.len())));
    }

    #[test]
    fn errors_lose_the_url() {
        let url = "postgres://u:pw1@h/db?password=pw1";
        let redacted = onceonly::db_url::redact(url);
        for text in [
            format!("reading from {url}: no"),
            format!("reading from {redacted}: no"),
        ] {
            assert_eq!(
                without_url(&text, url),
                "reading from postgres://u:***@h/db: no"
            );
        }
    }
}
