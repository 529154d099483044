//! No database password reaches the screen: not through `--help`'s env
//! display, not through an error about a database that cannot be reached.

mod common;

use std::process::Command;

use common::*;

const SECRET: &str = "s3cret";

#[test]
fn help_does_not_show_the_database_url_from_the_environment() {
    let url = format!("postgres://root:{SECRET}@db.internal/app?password={SECRET}");
    for args in [
        &["--help"][..],
        &["migrate", "--help"],
        &["bench", "--help"],
    ] {
        let out = Command::new(bin())
            .args(args)
            .env("ONCEONLY_DB", &url)
            .env("ONCEONLY_BENCH_PG", &url)
            .output()
            .unwrap();
        let said = text(&out);
        assert!(out.status.success(), "{args:?}: {said}");
        assert!(said.contains("ONCEONLY_DB"), "{args:?}: {said}");
        assert!(
            !said.contains(SECRET),
            "{args:?} printed the password: {said}"
        );
    }
}

#[test]
fn an_unreachable_database_never_shows_its_query_password() {
    let url = format!("postgres://u@127.0.0.1:1/db?password={SECRET}");
    for args in [
        &["migrate"][..],
        &["inspect"],
        &["purge", "--older-than", "1d"],
    ] {
        let out = oo(&url, args);
        let said = text(&out);
        assert!(!out.status.success(), "{args:?}: {said}");
        assert!(
            said.contains("127.0.0.1:1"),
            "{args:?} names the database: {said}"
        );
        assert!(
            !said.contains(SECRET),
            "{args:?} printed the password: {said}"
        );
    }
}
