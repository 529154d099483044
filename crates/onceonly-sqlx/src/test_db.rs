//! The server databases the test suites share (PostgreSQL, MySQL/MariaDB),
//! and what a suite does when it cannot reach one. Decided here once, for
//! every test crate.
//!
//! PostgreSQL is env `ONCEONLY_TEST_PG`, default
//! `postgres://postgres@127.0.0.1:5432/test` (create it with
//! `createdb -h 127.0.0.1 -U postgres test`); MySQL is env
//! `ONCEONLY_TEST_MYSQL`, default `mysql://root@127.0.0.1:3306/test`. When
//! one cannot be reached a test fails, naming the URL and how to get one, so
//! a missing database is never read as a green run; `ONCEONLY_SKIP_PG=1`
//! (`ONCEONLY_SKIP_MYSQL=1`) skips such tests instead (loudly), and under
//! `CI=true` they always fail. Every Rust test that needs one of these
//! servers asks [`TestDb::ready`] (or [`TestDb::may_skip`] for another
//! thing it lacks, such as PostgreSQL's server binaries); the rule is
//! written nowhere else.

/// The default test database.
pub const DEFAULT_PG_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// The default MySQL (MariaDB) test database.
pub const DEFAULT_MYSQL_URL: &str = "mysql://root@127.0.0.1:3306/test";

/// A server the suites test against: where to find it and how to get one.
#[derive(Debug)]
pub struct TestDb {
    /// Its name in messages.
    pub name: &'static str,
    /// The env var naming its URL.
    pub url_env: &'static str,
    /// The URL when the env var is unset.
    pub default_url: &'static str,
    /// The env var that, set to 1 outside CI, skips its tests.
    pub skip_env: &'static str,
    /// How to make the default database.
    pub how: &'static str,
}

/// PostgreSQL.
pub const PG: TestDb = TestDb {
    name: "PostgreSQL",
    url_env: "ONCEONLY_TEST_PG",
    default_url: DEFAULT_PG_URL,
    skip_env: "ONCEONLY_SKIP_PG",
    how: "Start PostgreSQL and create the database (createdb -h 127.0.0.1 -U postgres test)",
};

/// MySQL or MariaDB.
pub const MYSQL: TestDb = TestDb {
    name: "MySQL",
    url_env: "ONCEONLY_TEST_MYSQL",
    default_url: DEFAULT_MYSQL_URL,
    skip_env: "ONCEONLY_SKIP_MYSQL",
    how: "Start MariaDB and create the database (mysql -uroot -e 'CREATE DATABASE test')",
};

impl TestDb {
    /// The test database's URL: its env var, or its default.
    pub fn url(&self) -> String {
        std::env::var(self.url_env).unwrap_or_else(|_| self.default_url.to_owned())
    }

    /// Whether `test` runs, given why the server cannot be reached
    /// (`unavailable`, `None` when it can): `true` when it can; `false`
    /// (skip, loudly) when it cannot and the skip env var is 1 outside CI;
    /// otherwise the test panics, naming the URL and how to get one.
    ///
    /// ```no_run
    /// # async fn probe() -> Option<String> { None }
    /// # async fn my_test() {
    /// if !onceonly_sqlx::test_db::PG.ready("my_test", probe().await) {
    ///     return;
    /// }
    /// # }
    /// ```
    pub fn ready(&self, test: &str, unavailable: Option<String>) -> bool {
        match unavailable {
            None => true,
            Some(why) => !self.skip_unreachable(test, &why),
        }
    }

    /// Called when `test` cannot reach the test database (`why`): returns
    /// `true` (skip) only when the skip env var is 1 outside CI, and panics
    /// otherwise.
    pub fn skip_unreachable(&self, test: &str, why: &str) -> bool {
        let url = onceonly::db_url::redact(&self.url());
        self.may_skip(
            test,
            &format!("{} test database {url} unreachable: {why}", self.name),
            &format!("{}, or point {} at another", self.how, self.url_env),
        )
    }

    /// The one rule, for anything a test of this server needs and lacks
    /// (`problem`; `how` to get it): panics under `CI=true`; returns `true`
    /// (skip, loudly) when the skip env var is 1; panics otherwise.
    pub fn may_skip(&self, test: &str, problem: &str, how: &str) -> bool {
        let TestDb { name, skip_env, .. } = self;
        let ci = std::env::var("CI").ok();
        let skip = std::env::var(skip_env).ok();
        match verdict(ci.as_deref(), skip.as_deref()) {
            Verdict::FailUnderCi => {
                panic!("{test}: {problem} (under CI=true a test never skips)")
            }
            Verdict::Skip => {
                eprintln!("\n*** SKIPPED {test}: {problem} ({skip_env}=1) ***\n");
                true
            }
            Verdict::Fail => {
                panic!("{test}: {problem}\n{how}, or set {skip_env}=1 to skip the {name} tests.")
            }
        }
    }

    /// Why nothing answers on the URL's host and port within 2 seconds, if
    /// nothing does: a probe for tests that run the server through another
    /// process (the CLI) and have no driver connection of their own.
    pub fn tcp_unavailable(&self) -> Option<String> {
        use std::net::ToSocketAddrs;

        let url = self.url();
        let parsed = match url::Url::parse(&url) {
            Ok(u) => u,
            Err(e) => return Some(format!("{}: {e}", onceonly::db_url::redact(&url))),
        };
        let host = parsed.host_str().unwrap_or("127.0.0.1").to_owned();
        let port = parsed.port().unwrap_or(self.default_port());
        let addrs = match (host.as_str(), port).to_socket_addrs() {
            Ok(a) => a.collect::<Vec<_>>(),
            Err(e) => return Some(format!("{host}:{port}: {e}")),
        };
        let timeout = std::time::Duration::from_secs(2);
        if addrs
            .iter()
            .any(|a| std::net::TcpStream::connect_timeout(a, timeout).is_ok())
        {
            return None;
        }
        Some(format!("no answer on {host}:{port}"))
    }

    fn default_port(&self) -> u16 {
        url::Url::parse(self.default_url)
            .ok()
            .and_then(|u| u.port())
            .unwrap_or(0)
    }
}

/// What a test does when its server (or something else it needs) is
/// missing, by the values of `CI` and the server's skip variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    FailUnderCi,
    Skip,
    Fail,
}

fn verdict(ci: Option<&str>, skip: Option<&str>) -> Verdict {
    if ci == Some("true") {
        Verdict::FailUnderCi
    } else if skip == Some("1") {
        Verdict::Skip
    } else {
        Verdict::Fail
    }
}

/// The test database's URL: env `ONCEONLY_TEST_PG`, or [`DEFAULT_PG_URL`].
pub fn pg_url() -> String {
    PG.url()
}

/// The MySQL test database's URL: env `ONCEONLY_TEST_MYSQL`, or
/// [`DEFAULT_MYSQL_URL`].
pub fn mysql_url() -> String {
    MYSQL.url()
}

/// [`TestDb::skip_unreachable`] for PostgreSQL.
pub fn skip_unreachable(test: &str, why: &str) -> bool {
    PG.skip_unreachable(test, why)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_server_fails_unless_skipped_outside_ci() {
        assert_eq!(verdict(None, None), Verdict::Fail, "no silent green run");
        assert_eq!(verdict(Some("false"), Some("0")), Verdict::Fail);
        assert_eq!(verdict(None, Some("1")), Verdict::Skip);
        assert_eq!(
            verdict(Some("1"), Some("1")),
            Verdict::Skip,
            "CI is only `true`"
        );
        assert_eq!(verdict(Some("true"), Some("1")), Verdict::FailUnderCi);
        assert_eq!(verdict(Some("true"), None), Verdict::FailUnderCi);
    }

    #[test]
    fn ready_runs_when_nothing_is_missing_and_skips_when_told() {
        assert!(PG.ready("t", None));
        // The skip path itself: a server whose variables no one sets.
        let db = TestDb {
            name: "Nothing",
            url_env: "ONCEONLY_TEST_NOTHING_URL",
            default_url: "nothing://127.0.0.1:1/x",
            skip_env: "PATH",
            how: "-",
        };
        let outcome = std::panic::catch_unwind(|| db.ready("t", Some("down".into())));
        // PATH is never "1": outside CI this fails, under CI too.
        assert!(
            outcome.is_err(),
            "a missing server is a failure, not a skip"
        );
    }

    #[test]
    fn the_tcp_probe_names_what_does_not_answer() {
        let db = TestDb {
            name: "Nothing",
            url_env: "ONCEONLY_TEST_NOTHING_URL",
            default_url: "postgres://u:secret@127.0.0.1:1/x",
            skip_env: "ONCEONLY_SKIP_NOTHING",
            how: "-",
        };
        assert_eq!(
            db.tcp_unavailable().as_deref(),
            Some("no answer on 127.0.0.1:1")
        );
    }
}
