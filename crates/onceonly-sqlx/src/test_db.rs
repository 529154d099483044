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
//! `CI=true` they always fail.

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

    /// Called when `test` cannot reach the test database (`why`): returns
    /// `true` (skip) only when the skip env var is 1 outside CI, and panics
    /// otherwise.
    pub fn skip_unreachable(&self, test: &str, why: &str) -> bool {
        let TestDb {
            name,
            url_env,
            skip_env,
            how,
            ..
        } = self;
        let url = onceonly::db_url::redact(&self.url());
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("{test}: {name} test database {url} unreachable under CI=true: {why}");
        }
        if std::env::var(skip_env).as_deref() == Ok("1") {
            eprintln!("\n*** SKIPPED {test}: {name} test database {url} unreachable: {why} ({skip_env}=1) ***\n");
            return true;
        }
        panic!(
            "{test}: {name} test database {url} unreachable: {why}\n\
             {how}, point {url_env} at another, or set {skip_env}=1 to skip the {name} tests."
        )
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
