//! Helpers for driving the real `onceonly` binary.

#![allow(dead_code)]

use std::process::{Child, Command, Output, Stdio};

/// The binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_onceonly")
}

/// A fresh SQLite database URL in its own temp dir (kept for inspection).
pub fn sqlite_url() -> String {
    let dir = tempfile::Builder::new()
        .prefix("onceonly-cli")
        .tempdir()
        .unwrap()
        .keep();
    format!("sqlite://{}", dir.join("cli.db").display())
}

/// The PostgreSQL URL for tests (env `ONCEONLY_TEST_PG`); `None` (skip)
/// only when nothing answers on its host and port and `ONCEONLY_SKIP_PG=1`
/// is set outside CI, a failure otherwise
/// ([`onceonly_sqlx::test_db::TestDb::ready`]).
pub fn pg_url(test: &str) -> Option<String> {
    let db = &onceonly_sqlx::test_db::PG;
    db.ready(test, db.tcp_unavailable()).then(|| db.url())
}

/// The MySQL (MariaDB) URL for tests (env `ONCEONLY_TEST_MYSQL`); `None`
/// (skip) only when nothing answers on its host and port and
/// `ONCEONLY_SKIP_MYSQL=1` is set outside CI, a failure otherwise.
pub fn mysql_url(test: &str) -> Option<String> {
    let db = &onceonly_sqlx::test_db::MYSQL;
    db.ready(test, db.tcp_unavailable()).then(|| db.url())
}

/// A job type no other test uses, so tests share a PostgreSQL schema safely.
pub fn unique_job(prefix: &str) -> String {
    format!("{prefix}-{}-{}", std::process::id(), rand_suffix())
}

fn rand_suffix() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(
        std::time::SystemTime::now()
            .elapsed()
            .map_or(0, |d| d.as_nanos() as u64),
    );
    h.finish() % 1_000_000_007
}

/// Runs the binary to completion.
pub fn oo(db: &str, args: &[&str]) -> Output {
    oo_stdin(db, args, None)
}

/// Runs the binary with `stdin` piped in.
pub fn oo_stdin(db: &str, args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(bin())
        .arg("--db")
        .arg(db)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut input = child.stdin.take().unwrap();
        if let Some(text) = stdin {
            input.write_all(text.as_bytes()).unwrap();
        }
    }
    child.wait_with_output().unwrap()
}

/// Starts the binary in the background.
pub fn spawn(db: &str, args: &[&str]) -> Child {
    Command::new(bin())
        .arg("--db")
        .arg(db)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Text of an output, for assertion messages.
pub fn text(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `inspect --json` as parsed objects, by key.
pub fn inspect(db: &str, job: &str) -> std::collections::BTreeMap<String, serde_json::Value> {
    let out = oo(db, &["inspect", "--job", job, "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (v["key"].as_str().unwrap().to_owned(), v)
        })
        .collect()
}

/// Enqueues `op-0` .. `op-{n-1}` through `enqueue --jsonl -`; returns the keys.
pub fn enqueue_many(db: &str, job: &str, n: usize) -> Vec<String> {
    let keys: Vec<String> = (0..n).map(|i| format!("op-{i}")).collect();
    let lines: String = keys
        .iter()
        .map(|k| format!("{{\"key\": \"{k}\", \"payload\": {{\"k\": \"{k}\"}}}}\n"))
        .collect();
    let out = oo_stdin(db, &["enqueue", "--job", job, "--jsonl", "-"], Some(&lines));
    assert!(out.status.success(), "{}", text(&out));
    keys
}

/// A fresh SQLite file, migrated by `onceonly migrate`, and a store on it.
pub async fn migrated_sqlite() -> (String, onceonly_sqlite::SqliteStore) {
    let db = sqlite_url();
    let out = oo(&db, &["migrate"]);
    assert!(out.status.success(), "{}", text(&out));
    let store = onceonly_sqlite::SqliteStore::connect(&db).await.unwrap();
    (db, store)
}

/// The test PostgreSQL, migrated by `onceonly migrate`, and a store on it;
/// `None` (with a loud message) when it is unreachable outside CI.
pub async fn migrated_postgres(test: &str) -> Option<(String, onceonly_postgres::PgStore)> {
    let url = pg_url(test)?;
    let out = oo(&url, &["migrate"]);
    assert!(out.status.success(), "{}", text(&out));
    let store = onceonly_postgres::PgStore::connect(&url).await.unwrap();
    Some((url, store))
}
