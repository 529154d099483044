//! `onceonly check` and `onceonly run --config` through the real binary:
//! each timing rule of docs/DESIGN.md section 4 broken on its own and named with
//! its numbers; the longest observed claim-to-completion time (not the
//! average) against half the lease and half the timeout; a settings file
//! that does not parse named with its line and field; and the relay taking
//! its settings from the file, with flags overriding them. On SQLite and
//! PostgreSQL.

mod common;

use std::time::Duration;

use common::*;
use onceonly::store::{ClaimRow, OpClaim, OpMove};
use onceonly::{idempotency_key, Payload, State, Store};
use onceonly_http::test_server::{Mode, TestServer};

/// Writes `text` to a fresh onceonly.toml and returns its path.
fn config(text: &str) -> String {
    let dir = tempfile::tempdir().unwrap().keep();
    let path = dir.join("onceonly.toml");
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn check(db: &str, text: &str) -> (Option<i32>, String) {
    let path = config(text);
    let out = oo(db, &["check", "--config", &path]);
    (out.status.code(), text_of(&out))
}

fn text_of(out: &std::process::Output) -> String {
    text(out)
}

/// Each rule broken alone: exit 1, the job and the rule named with numbers.
fn each_rule_fails_named(db: &str) {
    let job = unique_job("rules");
    let cases = [
        (
            "timeout below the lease",
            "lease = \"10s\"\ntimeout = \"10s\"",
            "job timeout (10s) must be shorter than the lease (10s), or a heartbeat must renew the lease",
        ),
        (
            "heartbeat at lease/3",
            "lease = \"30s\"\ntimeout = \"5m\"\nheartbeat = \"11s\"",
            "heartbeat (11s) must renew the lease at least every lease/3 (10s)",
        ),
        (
            "redelivery after the timeout",
            "redelivery_timeout = \"5s\"",
            "queue redelivery timeout (5s) must be longer than the job timeout (10s)",
        ),
        (
            "lock outlives the timeout",
            "timeout = \"20s\"\nlock_lifetime = \"20s\"",
            "lock lifetime (20s) must be longer than the job timeout (20s)",
        ),
        (
            "lease and timeout above zero",
            "lease = \"0s\"\ntimeout = \"0s\"",
            "lease (0s) and timeout (0s) must both be above zero",
        ),
    ];
    for (rule, settings, sentence) in cases {
        let (code, said) = check(
            db,
            &format!("[jobs.{job}]\neffect = \"keyed\"\n{settings}\n"),
        );
        assert_eq!(code, Some(1), "{rule}: {said}");
        assert!(
            said.contains(&format!("job {job}: rule broken: {sentence}")),
            "{rule}: {said}"
        );
        assert!(
            said.contains("broken in") && said.contains("refuses to start"),
            "{rule}: {said}"
        );
    }

    // Every rule at once, over two job types: each one named, counted.
    let other = unique_job("rules-other");
    let (code, said) = check(
        db,
        &format!(
            "[jobs.{job}]\neffect = \"opaque\"\npolicy = \"hold\"\nlease = \"10s\"\ntimeout = \"10s\"\n\
             redelivery_timeout = \"10s\"\n\n[jobs.{other}]\neffect = \"lookup\"\nlock_lifetime = \"1s\"\n"
        ),
    );
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.contains(&format!("job {job}: rule broken: job timeout (10s)")),
        "{said}"
    );
    assert!(
        said.contains(&format!(
            "job {job}: rule broken: queue redelivery timeout (10s)"
        )),
        "{said}"
    );
    assert!(
        said.contains(&format!("job {other}: rule broken: lock lifetime (1s)")),
        "{said}"
    );
    assert!(said.contains("3 timing rules broken"), "{said}");

    // Settings that hold every rule pass.
    let (code, said) = check(
        db,
        &format!(
            "[jobs.{job}]\neffect = \"keyed\"\nlease = \"30s\"\ntimeout = \"10s\"\n\
             redelivery_timeout = \"5m\"\nlock_lifetime = \"1m\"\n\n\
             [jobs.{other}]\neffect = \"opaque\"\nlease = \"30s\"\ntimeout = \"5m\"\nheartbeat = \"10s\"\n"
        ),
    );
    assert_eq!(code, Some(0), "{said}");
    assert!(
        said.contains(&format!("job {job}: timing rules hold")),
        "{said}"
    );
    assert!(said.contains("every timing rule holds"), "{said}");
}

/// A file that does not parse, or names an unknown field: the file, the
/// line and the field are named.
fn bad_files_are_named(db: &str) {
    let path = config("[jobs.a]\neffect = \"keyed\"\nlease = \"30s\"\nleese = \"31s\"\n");
    let out = oo(db, &["check", "--config", &path]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let said = text(&out);
    assert!(said.contains(&format!("{path}:4:")), "{said}");
    assert!(
        said.contains("jobs.a.leese") && said.contains("unknown field"),
        "{said}"
    );

    let path = config("[jobs.a]\neffect = \"keyed\"\ntimeout = \"ten seconds\"\n");
    let said = text(&oo(db, &["check", "--config", &path]));
    assert!(
        said.contains(&format!("{path}:3:")) && said.contains("jobs.a.timeout"),
        "{said}"
    );

    let path = config("[jobs.a]\neffect = keyed\n");
    let said = text(&oo(db, &["check", "--config", &path]));
    assert!(
        said.contains(&format!("{path}:2:")) && said.contains("not valid TOML"),
        "{said}"
    );

    let out = oo(db, &["check", "--config", "/nonexistent/onceonly.toml"]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("/nonexistent/onceonly.toml"),
        "{}",
        text(&out)
    );
}

/// Completes `key` after a claim that lasted `took` on the store's clock.
async fn completed_after<S: Store>(store: &S, job: &str, key: &str, took: Duration) {
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
    store.clock_offset().advance(took);
    let moved = store
        .op_move(&OpMove::new(
            job,
            key,
            token,
            State::Claimed,
            State::Completed,
        ))
        .await
        .unwrap();
    assert!(moved);
}

/// Three 1s jobs and one 7s job: the average (2.5s) is under half the 10s
/// timeout, the longest is not, and check warns about the longest only.
async fn the_longest_run_is_compared<S: Store>(db: &str, store: &S) {
    let slow = unique_job("slow");
    let quick = unique_job("quick");
    for (i, secs) in [1, 1, 7, 1].into_iter().enumerate() {
        let key = if secs == 7 {
            "the-slow-one".to_owned()
        } else {
            format!("op-{i}")
        };
        completed_after(store, &slow, &key, Duration::from_secs(secs)).await;
    }
    completed_after(store, &quick, "q", Duration::from_secs(2)).await;
    let never = unique_job("never");
    let (code, said) = check(
        db,
        &format!(
            "[jobs.{slow}]\neffect = \"keyed\"\nlease = \"30s\"\ntimeout = \"10s\"\n\n\
             [jobs.{quick}]\neffect = \"keyed\"\n\n[jobs.{never}]\neffect = \"keyed\"\n"
        ),
    );
    assert_eq!(code, Some(0), "warnings alone do not fail: {said}");
    // The store's clock moved exactly; the statements between add a few ms.
    let warning = said
        .lines()
        .find(|l| l.starts_with(&format!("job {slow}: warning:")))
        .unwrap_or_else(|| panic!("no warning for {slow}: {said}"));
    assert!(
        warning.contains("the longest claim-to-completion time (7s"),
        "{warning}"
    );
    assert!(
        warning
            .contains("key \"the-slow-one\", of 4 completed) is more than half the timeout (10s)"),
        "{warning}"
    );
    assert_eq!(
        said.matches(&format!("job {slow}: warning")).count(),
        1,
        "not over half the lease (15s): {said}"
    );
    assert!(!said.contains(&format!("job {quick}: warning")), "{said}");
    assert!(
        said.contains(&format!(
            "job {quick}: the longest claim-to-completion time (2s"
        )),
        "{said}"
    );
    assert!(
        said.contains(&format!("job {never}: no completed records")),
        "{said}"
    );
    assert!(said.contains("(1 warning)"), "{said}");

    // Over half of both: a 20s run against lease 30s and timeout 10s.
    let long = unique_job("long");
    completed_after(store, &long, "k", Duration::from_secs(20)).await;
    let (code, said) = check(
        db,
        &format!("[jobs.{long}]\neffect = \"keyed\"\nlease = \"30s\"\ntimeout = \"10s\"\n"),
    );
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains("more than half the lease (30s)"), "{said}");
    assert!(said.contains("more than half the timeout (10s)"), "{said}");
}

/// `run --config`: the job's settings and destination come from the file;
/// flags given override them; a broken rule in the file stops the relay.
async fn run_takes_its_settings_from_the_file(db: &str) {
    let server = TestServer::start(Mode::Keyed).await.unwrap();
    let job = unique_job("cfgrun");
    for key in ["a", "b", "c"] {
        let out = oo(db, &["enqueue", "--job", &job, "--key", key]);
        assert!(out.status.success(), "{}", text(&out));
    }
    let good = config(&format!(
        "[jobs.{job}]\neffect = \"keyed\"\nlease = \"20s\"\ntimeout = \"5s\"\ndestination = \"{}\"\n",
        server.base_url()
    ));
    let run = |args: Vec<String>| {
        let db = db.to_owned();
        tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            oo(&db, &args)
        })
    };
    let args = |extra: &[&str]| -> Vec<String> {
        ["run", "--job", &job, "--drain", "--workers", "1"]
            .iter()
            .chain(extra)
            .map(|s| s.to_string())
            .collect()
    };
    let out = run(args(&["--config", &good])).await.unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let rows = inspect(db, &job);
    for key in ["a", "b", "c"] {
        assert_eq!(rows[key]["state"], "completed", "{}", rows[key]);
        assert_eq!(server.effects(&idempotency_key(&job, key)), 1);
    }

    // The file breaks a rule; run refuses to start, naming it.
    let broken = config(&format!(
        "[jobs.{job}]\neffect = \"keyed\"\nlease = \"10s\"\ntimeout = \"10s\"\n\
         redelivery_timeout = \"10s\"\ndestination = \"{}\"\n",
        server.base_url()
    ));
    let out = run(args(&["--config", &broken])).await.unwrap();
    assert!(!out.status.success());
    let said = text(&out);
    assert!(
        said.contains("job timeout (10s) must be shorter than the lease (10s)"),
        "{said}"
    );
    assert!(said.contains("queue redelivery timeout (10s)"), "{said}");

    // A flag given overrides the file: --lease 30s mends the first rule,
    // the file's redelivery timeout still stops it.
    let out = run(args(&["--config", &broken, "--lease", "30s"]))
        .await
        .unwrap();
    let said = text(&out);
    assert!(
        !said.contains("job timeout (10s) must be shorter"),
        "{said}"
    );
    assert!(said.contains("queue redelivery timeout (10s)"), "{said}");
    // --timeout 5s mends both, and --http points it elsewhere: it drains at once.
    let out = run(args(&[
        "--config",
        &broken,
        "--lease",
        "30s",
        "--timeout",
        "5s",
        "--http",
        "http://127.0.0.1:9",
    ]))
    .await
    .unwrap();
    assert!(out.status.success(), "{}", text(&out));

    // A job the file does not have; no file and no --http or --effect.
    let out = run(args(&["--config", &good])
        .into_iter()
        .map(|a| a.replace(&job, "nope"))
        .collect())
    .await
    .unwrap();
    assert!(!out.status.success());
    assert!(
        text(&out).contains("no [jobs.nope] table") && text(&out).contains(&job),
        "{}",
        text(&out)
    );
    let out = run(args(&["--effect", "keyed"])).await.unwrap();
    assert!(
        text(&out).contains("--http BASE_URL is required"),
        "{}",
        text(&out)
    );
    let out = run(args(&["--http", "http://127.0.0.1:9"])).await.unwrap();
    assert!(
        text(&out).contains("--effect keyed|lookup|opaque is required"),
        "{}",
        text(&out)
    );
}

async fn all<S: Store>(db: &str, store: S) {
    each_rule_fails_named(db);
    bad_files_are_named(db);
    the_longest_run_is_compared(db, &store).await;
    run_takes_its_settings_from_the_file(db).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_and_run_config_on_sqlite() {
    let (db, store) = migrated_sqlite().await;
    all(&db, store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_and_run_config_on_postgres() {
    let Some((url, store)) = migrated_postgres("check_and_run_config_on_postgres").await else {
        return;
    };
    all(&url, store).await;
}
