//! The PostgreSQL database the test suites share, and what a suite does when
//! it cannot reach it. Decided here once, for every test crate.
//!
//! The database is env `ONCEONLY_TEST_PG`, default
//! `postgres://postgres@127.0.0.1:5432/test` (create it with
//! `createdb -h 127.0.0.1 -U postgres test`). When it cannot be reached a
//! test fails, naming the URL and how to get one, so a missing database is
//! never read as a green run; `ONCEONLY_SKIP_PG=1` skips such tests instead
//! (loudly), and under `CI=true` they always fail.

/// The default test database.
pub const DEFAULT_PG_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// The test database's URL: env `ONCEONLY_TEST_PG`, or [`DEFAULT_PG_URL`].
pub fn pg_url() -> String {
    std::env::var("ONCEONLY_TEST_PG").unwrap_or_else(|_| DEFAULT_PG_URL.to_owned())
}

/// Called when `test` cannot reach the test database (`why`): returns `true`
/// (skip) only when `ONCEONLY_SKIP_PG=1` is set outside CI, and panics
/// otherwise.
pub fn skip_unreachable(test: &str, why: &str) -> bool {
    let url = onceonly::db_url::redact(&pg_url());
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{test}: PostgreSQL test database {url} unreachable under CI=true: {why}");
    }
    if std::env::var("ONCEONLY_SKIP_PG").as_deref() == Ok("1") {
        eprintln!("\n*** SKIPPED {test}: PostgreSQL test database {url} unreachable: {why} (ONCEONLY_SKIP_PG=1) ***\n");
        return true;
    }
    panic!(
        "{test}: PostgreSQL test database {url} unreachable: {why}\n\
         Start PostgreSQL and create the database (createdb -h 127.0.0.1 -U postgres test), \
         point ONCEONLY_TEST_PG at another, or set ONCEONLY_SKIP_PG=1 to skip the PostgreSQL tests."
    )
}
