//! A database the relay cannot write ends `run --drain` with an error naming
//! the database and the cause, instead of retrying for ever.

mod common;

use std::os::unix::process::CommandExt;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// Nobody, for running the relay without root's right to write anything.
const NOBODY: u32 = 65534;

/// Runs `run --drain` of `job` on `db` (as `uid` when given) and returns its
/// output; fails if it has not ended after 30 s.
fn drain(db: &str, job: &str, uid: Option<u32>) -> Output {
    let mut command = Command::new(bin());
    command
        .args([
            "--db", db, "run", "--drain", "--job", job, "--effect", "keyed",
        ])
        .args([
            "--http",
            "http://127.0.0.1:9",
            "--lease",
            "5s",
            "--timeout",
            "2s",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(uid) = uid {
        command.uid(uid).gid(uid);
    }
    let mut child = command.spawn().unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(30) {
            child.kill().unwrap();
            let out = child.wait_with_output().unwrap();
            panic!("run --drain still retrying after 30 s: {}", text(&out));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

fn assert_stopped_naming(out: &Output, db_shown: &str, cause: &str) {
    let said = text(out);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains(&format!(
            "run stopped: the database {db_shown} refused for good"
        )),
        "{said}"
    );
    assert!(said.contains(cause), "the cause: {said}");
}

#[test]
fn a_read_only_sqlite_file_ends_run_drain() {
    use std::os::unix::fs::PermissionsExt;
    let db = sqlite_url();
    let job = unique_job("ro");
    assert!(oo(&db, &["migrate"]).status.success());
    let out = oo(&db, &["enqueue", "--job", &job, "--key", "k1"]);
    assert!(out.status.success(), "{}", text(&out));

    let path = std::path::PathBuf::from(db.strip_prefix("sqlite://").unwrap());
    let dir = path.parent().unwrap();
    // Root may write any file: the relay then runs as nobody, owning the
    // folder and the WAL but not allowed to write the database file.
    let uid = nix_is_root().then_some(NOBODY);
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap().path();
        if uid.is_some() {
            std::os::unix::fs::chown(&entry, uid, uid).unwrap();
        }
    }
    if uid.is_some() {
        std::os::unix::fs::chown(dir, uid, uid).unwrap();
    }
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o400)).unwrap();

    let out = drain(&db, &job, uid);
    assert_stopped_naming(&out, &db, "readonly database");
}

#[test]
fn a_read_only_postgres_session_ends_run_drain() {
    let Some(url) = pg_url("a_read_only_postgres_session_ends_run_drain") else {
        return;
    };
    let job = unique_job("ro");
    assert!(oo(&url, &["migrate"]).status.success());
    let out = oo(&url, &["enqueue", "--job", &job, "--key", "k1"]);
    assert!(out.status.success(), "{}", text(&out));

    // Every transaction of this session read-only, as with
    // `ALTER ROLE ... SET default_transaction_read_only = on`.
    let sep = if url.contains('?') { '&' } else { '?' };
    let read_only = format!("{url}{sep}options=-c%20default_transaction_read_only%3Don");
    let out = drain(&read_only, &job, None);
    assert_stopped_naming(
        &out,
        &onceonly::db_url::redact(&read_only),
        "read-only transaction",
    );

    // The operation is still queued, for a writable relay.
    let out = oo(&url, &["inspect", "--job", &job, "--json"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains(r#""state":"queued""#));
}

fn nix_is_root() -> bool {
    // The owner of a file this process just made is its effective user.
    use std::os::unix::fs::MetadataExt;
    let probe = tempfile::NamedTempFile::new().unwrap();
    probe.as_file().metadata().unwrap().uid() == 0
}
