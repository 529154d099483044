//! `onceonly console` through the real binary: it refuses to listen beyond
//! loopback without a token, before opening anything, and on loopback it
//! serves the login page with the database's password hidden.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;

use common::*;

#[test]
fn beyond_loopback_without_a_token_refuses_to_start() {
    let db = sqlite_url();
    let out = std::process::Command::new(bin())
        .args(["--db", &db, "console", "--listen", "0.0.0.0:0"])
        .env_remove("ONCEONLY_CONSOLE_TOKEN")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("without a token"), "{err}");
    let path = db.trim_start_matches("sqlite://");
    assert!(
        !std::path::Path::new(path).exists(),
        "nothing opened or created"
    );
}

#[test]
fn on_loopback_it_serves_the_login_page() {
    let db = sqlite_url();
    let mut child = std::process::Command::new(bin())
        .args(["--db", &db, "console", "--listen", "127.0.0.1:0"])
        .env("ONCEONLY_CONSOLE_TOKEN", "a-token-of-length")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // "onceonly console: http://127.0.0.1:PORT/ (...)"
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_owned();
    let mut conn = TcpStream::connect(&addr).unwrap();
    write!(
        conn,
        "GET /held HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    conn.read_to_string(&mut answer).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    assert!(
        answer.contains("name=\"token\""),
        "the token is asked for: {answer}"
    );
    assert!(!answer.contains("a-token-of-length"));
}

/// `onceonly console` started on `db` (loopback, a token, info logs) and
/// its address, read from its first line.
fn start(
    db: &str,
) -> (
    std::process::Child,
    BufReader<std::process::ChildStderr>,
    String,
    String,
) {
    let mut child = std::process::Command::new(bin())
        .args(["--db", db, "console", "--listen", "127.0.0.1:0"])
        .env("ONCEONLY_CONSOLE_TOKEN", "a-token-of-length")
        .env("ONCEONLY_LOG", "info")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    while !first.contains("http://") {
        first.clear();
        assert!(
            stderr.read_line(&mut first).unwrap() > 0,
            "the console ended"
        );
    }
    let addr = first
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("no address in {first:?}"))
        .to_owned();
    (child, stderr, addr, first)
}

#[test]
fn no_database_password_in_its_log_lines_or_login_page() {
    let Some(pg) = pg_url("no_database_password_in_its_log_lines_or_login_page") else {
        return;
    };
    let mut userinfo = url::Url::parse(&pg).unwrap();
    userinfo.set_password(Some("pw-s3cret-userinfo")).unwrap();
    let mut query = url::Url::parse(&pg).unwrap();
    query.set_query(Some("password=pw-s3cret-query"));
    // sqlx does not know sslpassword: it logs it, with its value, unless
    // the CLI's log filter stops it.
    let mut ssl = url::Url::parse(&pg).unwrap();
    ssl.set_query(Some("sslmode=prefer&sslpassword=pw-s3cret-ssl"));
    for db in [userinfo.to_string(), query.to_string(), ssl.to_string()] {
        let (mut child, mut stderr, addr, first) = start(&db);
        let mut conn = TcpStream::connect(&addr).unwrap();
        write!(
            conn,
            "GET /login HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut page = String::new();
        conn.read_to_string(&mut page).unwrap();
        let _ = child.kill();
        let _ = child.wait();
        let mut logs = first;
        stderr.read_to_string(&mut logs).unwrap();
        assert!(page.starts_with("HTTP/1.1 200"), "{page}");
        assert!(logs.contains("console listening"), "{logs}");
        for (what, text) in [("log lines", &logs), ("login page", &page)] {
            assert!(
                !text.contains("pw-s3cret"),
                "{db}: the password in its {what}:\n{text}"
            );
            assert!(
                text.contains("127.0.0.1:5432"),
                "{db}: the database is named in its {what}"
            );
        }
    }
}
