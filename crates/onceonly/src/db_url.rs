//! Database URLs as users give them: which database one names, and how an
//! error may print one.

use crate::error::{Error, Result};

/// The databases onceonly stores its records in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DbKind {
    /// `sqlite://PATH` (relative) or `sqlite:///ABS/PATH`.
    Sqlite,
    /// `postgres://...` or `postgresql://...`.
    Postgres,
    /// `mysql://...` or `mariadb://...` (MySQL 8 or MariaDB).
    MySql,
}

/// What a database URL must look like, for errors.
pub const EXPECTED: &str =
    "sqlite://PATH, sqlite:///ABS/PATH, postgres://... (postgresql://...) or mysql://HOST/DATABASE (mariadb://...)";

impl DbKind {
    /// The database `url` names, by its scheme; any other is
    /// [`Error::Invalid`] naming the URL (its password hidden) and what is
    /// expected. The one place a URL is classified: the CLI, the console
    /// and the tools all ask here.
    pub fn of(url: &str) -> Result<DbKind> {
        if url.starts_with("sqlite:") {
            Ok(DbKind::Sqlite)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(DbKind::Postgres)
        } else if url.starts_with("mysql://") || url.starts_with("mariadb://") {
            Ok(DbKind::MySql)
        } else {
            Err(Error::Invalid(format!(
                "database URL {:?}: expected {EXPECTED}",
                redact(url)
            )))
        }
    }
}

/// Query parameters that carry a secret (libpq's `password`,
/// `sslpassword`, and `passfile`, which names where one lies).
const SECRET_PARAMS: [&str; 3] = ["password", "sslpassword", "passfile"];

/// The URL with every password replaced by `***`, safe to print: the one
/// in `user:pass@` and the values of the query's `password`, `sslpassword`
/// and `passfile`. Text, not a parsed URL, so that a malformed URL is
/// masked too (a password holding `/`, `?` or `@` still ends at the last
/// `@`), and text that is no URL but could hold a secret (`@` or `=` in it)
/// is not shown at all. Every client applies the same rule
/// (`protocol/corpus/db_urls.json`).
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = split_scheme(url) else {
        return if url.contains(['@', '=']) {
            "***".to_owned()
        } else {
            url.to_owned()
        };
    };
    let (slashes, body) = match rest.strip_prefix("//") {
        Some(body) => ("//", body),
        None => ("", rest),
    };
    let body = mask_query(body);
    let body = match body.rfind('@') {
        Some(at) => match body[..at].find(':') {
            Some(colon) => format!("{}:***{}", &body[..colon], &body[at..]),
            None => body,
        },
        None => body,
    };
    format!("{scheme}:{slashes}{body}")
}

/// `scheme` and what follows `scheme:`, when `url` begins with one.
fn split_scheme(url: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = url.split_once(':')?;
    let mut chars = scheme.chars();
    let first_is_letter = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    let rest_is_scheme = chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    (first_is_letter && rest_is_scheme).then_some((scheme, rest))
}

/// `body` with the value of every secret query parameter (after the first
/// `?`, named case-insensitively, percent-encoded or not) as `***`.
fn mask_query(body: &str) -> String {
    let Some((before, query)) = body.split_once('?') else {
        return body.to_owned();
    };
    let pairs: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((name, _)) if is_secret_param(name) => format!("{name}=***"),
            _ => pair.to_owned(),
        })
        .collect();
    format!("{before}?{}", pairs.join("&"))
}

fn is_secret_param(name: &str) -> bool {
    let decoded: String = url::form_urlencoded::parse(name.as_bytes())
        .map(|(k, _)| k.into_owned())
        .collect();
    let decoded = decoded.trim().to_ascii_lowercase();
    SECRET_PARAMS.contains(&decoded.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_print() {
        assert_eq!(
            redact("postgres://u:secret@h:5432/db"),
            "postgres://u:***@h:5432/db"
        );
        assert_eq!(redact("sqlite://x.db"), "sqlite://x.db");
    }

    #[test]
    fn urls_are_classified_by_scheme() {
        for (url, kind) in [
            ("sqlite://onceonly.db", DbKind::Sqlite),
            ("sqlite:///var/lib/onceonly.db", DbKind::Sqlite),
            ("postgres://app@db.internal/app", DbKind::Postgres),
            ("postgresql://app:pw@db.internal:5432/app", DbKind::Postgres),
            ("mysql://root@127.0.0.1:3306/test", DbKind::MySql),
            ("mariadb://app:pw@db.internal/app", DbKind::MySql),
        ] {
            assert_eq!(DbKind::of(url).unwrap(), kind, "{url}");
        }
    }

    #[test]
    fn other_databases_are_refused_naming_the_url_without_its_password() {
        for url in [
            "mssql://app:hunter2@db.internal/app",
            "mysql:/app",
            "postgres:/app",
            "onceonly.db",
            "",
        ] {
            let Err(Error::Invalid(msg)) = DbKind::of(url) else {
                panic!("{url:?} accepted");
            };
            assert!(msg.contains(EXPECTED), "{msg}");
            assert!(!msg.contains("hunter2"), "the password printed: {msg}");
        }
        let Err(e) = DbKind::of("mssql://app:hunter2@db.internal/app") else {
            unreachable!()
        };
        assert!(
            e.to_string()
                .contains("\"mssql://app:***@db.internal/app\""),
            "{e}"
        );
    }
}
