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

/// The URL with any password replaced by `***`, safe to print.
pub fn redact(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            let _ = parsed.set_password(Some("***"));
            parsed.to_string()
        }
        _ => url.to_owned(),
    }
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
