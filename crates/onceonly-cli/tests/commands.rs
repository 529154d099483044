//! The command-line surface of docs/DESIGN.md section 6, driven through the real
//! binary on a real SQLite file and a real PostgreSQL.

mod common;

use common::*;

fn enqueue_and_inspect(db: &str) {
    let job = unique_job("cli");
    let ok = |args: &[&str]| {
        let out = oo(db, args);
        assert!(out.status.success(), "{args:?}: {}", text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    ok(&["migrate"]);
    ok(&["migrate"]);
    assert!(ok(&[
        "enqueue",
        "--job",
        &job,
        "--key",
        "k1",
        "--payload",
        r#"{"a": 1}"#
    ])
    .contains("queued"));
    let again = ok(&[
        "enqueue",
        "--job",
        &job,
        "--key",
        "k1",
        "--payload",
        r#"{ "a":1 }"#,
    ]);
    assert!(
        again.contains("already exists with the same payload"),
        "{again}"
    );

    let other = oo(
        db,
        &[
            "enqueue",
            "--job",
            &job,
            "--key",
            "k1",
            "--payload",
            r#"{"a": 2}"#,
        ],
    );
    assert!(!other.status.success());
    assert!(text(&other).contains("another payload"), "{}", text(&other));

    let bad = oo(
        db,
        &[
            "enqueue",
            "--job",
            &job,
            "--key",
            "k2",
            "--payload",
            "{nope",
        ],
    );
    assert!(!bad.status.success());
    assert!(text(&bad).contains("not valid JSON"), "{}", text(&bad));

    let bad_job = oo(db, &["enqueue", "--job", "has space", "--key", "k2"]);
    assert!(!bad_job.status.success());
    assert!(text(&bad_job).contains("job type"), "{}", text(&bad_job));

    // All or nothing: one bad line and one conflicting line refuse the batch.
    let lines = format!(
        "{}\n{}\nnot json\n{}\n",
        r#"{"key": "k3", "payload": {"n": 3}}"#,
        r#"{"key": "k4"}"#,
        r#"{"key": "k1", "payload": {"a": 9}}"#
    );
    let refused = oo_stdin(
        db,
        &["enqueue", "--job", &job, "--jsonl", "-"],
        Some(&lines),
    );
    assert!(!refused.status.success(), "{}", text(&refused));
    let said = text(&refused);
    assert!(said.contains("line 3") && said.contains("line 4"), "{said}");
    assert!(
        !inspect(db, &job).contains_key("k3"),
        "nothing from a refused batch is queued"
    );

    let good = format!(
        "{}\n{}\n",
        r#"{"key": "k3", "payload": {"n": 3}}"#, r#"{"key": "k4"}"#
    );
    let out = oo_stdin(db, &["enqueue", "--job", &job, "--jsonl", "-"], Some(&good));
    assert!(out.status.success(), "{}", text(&out));

    let records = inspect(db, &job);
    assert_eq!(records.keys().collect::<Vec<_>>(), ["k1", "k3", "k4"]);
    for field in [
        "job",
        "key",
        "state",
        "token",
        "attempts",
        "external_ref",
        "owner",
        "error",
        "cancel_requested",
        "claimed_at",
        "lease_until",
        "updated_at",
    ] {
        assert!(
            records["k1"].get(field).is_some(),
            "inspect --json lacks {field}"
        );
    }
    assert_eq!(records["k1"]["state"], "queued");

    // Cancel a queued operation: cancelled at once, exit 0.
    let out = oo(db, &["cancel", "--job", &job, "--key", "k4"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(inspect(db, &job)["k4"]["state"], "cancelled");
    let missing = oo(db, &["cancel", "--job", &job, "--key", "nope"]);
    assert!(!missing.status.success());
}

#[test]
fn enqueue_inspect_cancel_on_sqlite() {
    enqueue_and_inspect(&sqlite_url());
}

#[test]
fn enqueue_inspect_cancel_on_postgres() {
    if let Some(url) = pg_url("enqueue_inspect_cancel_on_postgres") {
        enqueue_and_inspect(&url);
    }
}

#[test]
fn another_database_is_refused_naming_what_is_expected() {
    for command in [
        &["inspect"][..],
        &["migrate"],
        &["cancel", "--job", "j", "--key", "k"],
    ] {
        let out = oo("mssql://someone:hunter2@127.0.0.1/app", command);
        assert_eq!(out.status.code(), Some(2), "bad input: {}", text(&out));
        let said = text(&out);
        assert!(
            said.contains("mssql://someone:***@127.0.0.1/app")
                && said.contains("expected sqlite://PATH"),
            "{said}"
        );
        assert!(!said.contains("hunter2"), "password printed: {said}");
    }
}

#[test]
fn an_unreachable_database_is_named_with_its_password_redacted() {
    let out = oo(
        "postgres://someone:hunter2@127.0.0.1:1/nowhere",
        &["inspect"],
    );
    assert!(!out.status.success());
    let said = text(&out);
    assert!(
        said.contains("unreachable") && said.contains("127.0.0.1:1"),
        "{said}"
    );
    assert!(!said.contains("hunter2"), "password printed: {said}");
}

#[test]
fn a_broken_timing_rule_stops_run_before_it_starts() {
    let db = sqlite_url();
    let out = oo(
        &db,
        &[
            "run",
            "--job",
            "j",
            "--http",
            "http://127.0.0.1:9",
            "--effect",
            "keyed",
            "--lease",
            "5s",
            "--timeout",
            "5s",
        ],
    );
    assert!(!out.status.success());
    assert!(
        text(&out).contains("job timeout (5s) must be shorter than the lease (5s)"),
        "{}",
        text(&out)
    );
    let out = oo(
        &db,
        &[
            "run",
            "--job",
            "j",
            "--http",
            "http://127.0.0.1:9",
            "--effect",
            "keyed",
            "--on-stale",
            "hold",
        ],
    );
    assert!(!out.status.success());
    assert!(
        text(&out).contains("--on-stale hold applies to --effect opaque only"),
        "{}",
        text(&out)
    );
}

#[test]
fn read_only_commands_create_nothing_and_name_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("typo.db");
    let db = format!("sqlite://{}", path.display());
    for args in [
        &["inspect"][..],
        &["held"],
        &["stuck"],
        &["history", "--job", "j", "--key", "k"],
    ] {
        let out = oo(&db, args);
        assert!(!out.status.success(), "{args:?}: {}", text(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&path.display().to_string()) && err.contains("no SQLite database"),
            "{args:?} names the missing file: {err}"
        );
        assert!(!path.exists(), "{args:?} created {}", path.display());
    }

    // A file without onceonly's tables is not given any either.
    std::fs::File::create(&path).unwrap();
    let out = oo(&db, &["inspect"]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no onceonly tables"),
        "{}",
        text(&out)
    );
    let out = oo(&db, &["migrate"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = oo(&db, &["inspect", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
}

#[test]
fn keys_a_destination_cannot_carry_are_refused_at_enqueue() {
    let db = sqlite_url();
    assert!(oo(&db, &["migrate"]).status.success());
    let job = unique_job("badkey");
    for key in ["line\nbreak", "bell\u{7}", "crlf\r\n", "trailing "] {
        let out = oo(
            &db,
            &["enqueue", "--job", &job, "--key", key, "--payload", "{}"],
        );
        assert!(
            !out.status.success(),
            "{key:?} was accepted: {}",
            text(&out)
        );
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("operation key"),
            "{}",
            text(&out)
        );
    }
    let lines =
        "{\"key\": \"ok-1\", \"payload\": {}}\n{\"key\": \"bad\\u0001\", \"payload\": {}}\n";
    let out = oo_stdin(
        &db,
        &["enqueue", "--job", &job, "--jsonl", "-"],
        Some(lines),
    );
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        inspect(&db, &job).is_empty(),
        "all or nothing: nothing queued"
    );
}

#[test]
fn a_sqlite_file_that_cannot_be_opened_is_named() {
    let out = oo("sqlite:///nonexistent-dir-for-onceonly/x.db", &["migrate"]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("/nonexistent-dir-for-onceonly/x.db"),
        "{}",
        text(&out)
    );
}
