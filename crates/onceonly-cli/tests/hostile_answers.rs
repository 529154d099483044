//! Issue 26, through the real binary: values from outside are printed with
//! their control characters escaped; a header value holding CR/LF refuses
//! to start (nothing claimed or failed); `check` refuses what `run`
//! refuses, with the same sentence.

mod common;

use std::process::Command;
use std::time::Duration;

use common::*;
use onceonly::store::{ClaimRow, OpClaim, OpMove};
use onceonly::{Payload, State, Store};

/// A record holding NUL, ESC, CR, LF and BEL in its reference and error,
/// as a destination (or an older client) could have left it.
async fn hostile_record<S: Store>(store: &S, job: &str, key: &str) {
    let payload = Payload::none();
    let token = match store
        .op_claim(&OpClaim {
            job_type: job,
            op_key: key,
            fingerprint: &payload.fingerprint,
            payload: None,
            owner: "worker-test",
            lease: Duration::from_secs(60),
        })
        .await
        .unwrap()
    {
        ClaimRow::Claimed(c) => c.token,
        other => panic!("{other:?}"),
    };
    let moved = store
        .op_move(
            &OpMove::new(job, key, token, State::Claimed, State::Failed)
                .with_external_ref(Some("ref\0\x1b[2J\r\nFAKE completed\x07"))
                .with_error("boom\x1b]0;title\x07\n\u{202e}txt.exe"),
        )
        .await
        .unwrap();
    assert!(moved, "the hostile record was written");
}

fn assert_escaped(what: &str, shown: &str) {
    for c in ['\0', '\x1b', '\r', '\x07', '\u{202e}'] {
        assert!(!shown.contains(c), "{what} printed {c:?} raw: {shown:?}");
    }
    assert!(
        shown.contains("ref\\0\\x1b[2J\\r\\nFAKE completed\\x07"),
        "{what}: {shown:?}"
    );
    assert!(
        !shown.lines().any(|l| l.starts_with("FAKE")),
        "{what}: {shown:?}"
    );
}

#[tokio::test]
async fn inspect_and_held_print_control_characters_escaped() {
    let (db, store) = migrated_sqlite().await;
    let job = unique_job("hostile");
    hostile_record(&store, &job, "k1").await;
    let out = oo(&db, &["inspect", "--job", &job]);
    assert!(out.status.success(), "{}", text(&out));
    let shown = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_escaped("inspect", &shown);
    assert!(shown.contains("\\u{202e}txt.exe"), "{shown:?}");
    // --json stays exact JSON: its own escapes, the value intact.
    let json = inspect(&db, &job);
    assert_eq!(
        json["k1"]["external_ref"],
        "ref\0\x1b[2J\r\nFAKE completed\x07"
    );
    let out = oo(&db, &["history", "--job", &job, "--key", "k1"]);
    let shown = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        !shown.contains('\x1b') && shown.contains("boom\\x1b]0;title"),
        "{shown:?}"
    );
}

#[tokio::test]
async fn a_header_with_cr_lf_refuses_to_start_and_claims_nothing() {
    let (db, _store) = migrated_sqlite().await;
    let job = unique_job("hdr");
    let out = oo(&db, &["enqueue", "--job", &job, "--key", "k1"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = oo(
        &db,
        &[
            "run",
            "--job",
            &job,
            "--http",
            "http://127.0.0.1:9",
            "--effect",
            "keyed",
            "--header",
            "X-A: b\r\nX-Inj: 1",
            "--drain",
        ],
    );
    assert!(!out.status.success(), "{}", text(&out));
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(said.contains("header x-a:"), "{said}");
    assert!(said.contains("U+000D"), "{said}");
    assert!(!said.contains("X-Inj"), "the value is not shown: {said}");
    let record = &inspect(&db, &job)["k1"];
    assert_eq!(record["state"], "queued", "{record}");
    assert_eq!(record["attempts"], 0, "{record}");

    // The same from the settings file, and from an environment variable.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("onceonly.toml");
    std::fs::write(
        &file,
        format!(
            "[jobs.{job}]\neffect = \"keyed\"\ndestination = \"http://127.0.0.1:9\"\n\
             [jobs.{job}.http]\nheaders = {{ X-B = \"v\\u0007\", Authorization = \"Bearer {{env.HDR_TOKEN}}\" }}\n"
        ),
    )
    .unwrap();
    let out = Command::new(bin())
        .args(["--db", &db, "run", "--job", &job, "--drain", "--config"])
        .arg(&file)
        .env("HDR_TOKEN", "t\n")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("header "), "{said}");
    assert_eq!(inspect(&db, &job)["k1"]["attempts"], 0);
}

#[tokio::test]
async fn check_refuses_what_run_refuses_with_the_same_sentence() {
    let (db, _store) = migrated_sqlite().await;
    let job = unique_job("same");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("onceonly.toml");
    std::fs::write(
        &file,
        format!(
            "[jobs.{job}]\neffect = \"keyed\"\ndestination = \"http://mail.example.com:8080\"\n\
             [jobs.{job}.http]\nheaders = {{ Authorization = \"Bearer {{env.SAME_TOKEN}}\" }}\n"
        ),
    )
    .unwrap();
    let run = |args: &[&str]| {
        Command::new(bin())
            .args(["--db", &db])
            .args(args)
            .arg("--config")
            .arg(&file)
            .env("SAME_TOKEN", "secret-tok")
            .output()
            .unwrap()
    };
    let refused = run(&["run", "--job", &job, "--drain"]);
    assert!(!refused.status.success(), "{}", text(&refused));
    let said = String::from_utf8_lossy(&refused.stderr).into_owned();
    let sentence = "a credential would travel over plain http:// to mail.example.com";
    assert!(said.contains(sentence), "{said}");
    let checked = run(&["check"]);
    let shown = text(&checked);
    assert_eq!(checked.status.code(), Some(1), "{shown}");
    // The whole rule as run states it, under the job's name.
    let rule = said
        .trim()
        .strip_prefix("onceonly: ")
        .and_then(|s| s.strip_prefix(&format!("job {job}: ")))
        .unwrap_or_else(|| panic!("run's refusal names the job: {said}"));
    assert!(
        shown.contains(&format!("job {job}: rule broken: {rule}")),
        "check did not state run's rule {rule:?}: {shown}"
    );
    assert!(!shown.contains("every timing rule holds"), "{shown}");
}
