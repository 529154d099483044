//! `onceonly consume`, `check` and `replay --queue` through the real
//! binary, the same way on every broker; each test file names its broker.

#![allow(dead_code)]

use std::process::Child;
use std::time::{Duration, Instant};

use onceonly::idempotency_key;
use onceonly_http::test_server::{Mode, TestServer};

use crate::common::*;

/// A broker's command-line options.
pub struct Target {
    /// After `consume`: `nats --stream S --consumer C` or `sqs --queue-url U ...`.
    pub consume: Vec<String>,
    /// For `check`: `--nats-consumer S/C` or `--sqs-queue-url U --sqs-endpoint E`.
    pub check: Vec<String>,
    /// For `replay`: `--queue nats --nats URL` or `--queue sqs --sqs-endpoint E`.
    pub replay: Vec<String>,
    /// Environment for the processes (credentials for the emulator).
    pub env: Vec<(String, String)>,
}

fn run(db: &str, args: &[String], env: &[(String, String)]) -> std::process::Output {
    std::process::Command::new(bin())
        .arg("--db")
        .arg(db)
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .unwrap()
}

fn spawn_with(db: &str, args: &[String], env: &[(String, String)]) -> Child {
    std::process::Command::new(bin())
        .arg("--db")
        .arg(db)
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// SIGTERM, then the process's stderr once it has exited.
fn stop(child: Child) -> String {
    let pid = child.id().to_string();
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(sent.success());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The number after `word ` in a `consume` summary line.
fn count(stderr: &str, word: &str) -> u64 {
    let line = stderr
        .lines()
        .rev()
        .find(|l| l.contains("received "))
        .unwrap_or_else(|| panic!("no summary in {stderr}"));
    let at = line.find(&format!("{word} ")).unwrap() + word.len() + 1;
    line[at..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// `text` without its ANSI colour codes (the log lines are coloured).
fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // ESC [ ... m
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// How the summary names poison: `terminated` (JetStream) or
/// `dead-lettered` (SQS).
fn poison_word(stderr: &str) -> &'static str {
    if stderr.contains(" terminated ") {
        "terminated"
    } else {
        "dead-lettered"
    }
}

/// The N of `(N effects done here)` in a `consume` summary line.
fn effects_done(stderr: &str) -> u64 {
    let at = stderr
        .rfind(" effects done here")
        .unwrap_or_else(|| panic!("no summary in {stderr}"));
    let start = stderr[..at].rfind('(').unwrap() + 1;
    stderr[start..at].parse().unwrap()
}

/// Two consumer processes, 100 operations each sent twice: 100 effects,
/// one per operation, and all 200 messages acked between them.
/// `drained` says when the broker holds no message, visible or in hand.
pub async fn two_processes(
    target: &Target,
    publish: impl AsyncFn(Vec<u8>),
    drained: impl AsyncFn() -> bool,
) {
    const OPS: usize = 100;
    let db = sqlite_url();
    let out = oo(&db, &["migrate"]);
    assert!(out.status.success(), "{}", text(&out));
    let server = TestServer::start(Mode::Keyed).await.unwrap();
    let job = unique_job("consume");
    let mut args = vec!["consume".to_owned()];
    args.extend(target.consume.iter().cloned());
    args.extend(
        [
            "--job",
            &job,
            "--http",
            &server.base_url(),
            "--effect",
            "keyed",
            "--lease",
            "3s",
            "--timeout",
            "1s",
            "--workers",
            "4",
        ]
        .map(str::to_owned),
    );
    let consumers = [
        spawn_with(&db, &args, &target.env),
        spawn_with(&db, &args, &target.env),
    ];
    for _round in 0..2 {
        for i in 0..OPS {
            let body = onceonly_consume::envelope_body(
                &format!("order-{i}"),
                &serde_json::json!({ "order": i, "round": "same" }),
            );
            publish(body).await;
        }
    }
    let started = Instant::now();
    loop {
        let effects = server.all_effects();
        if effects.len() == OPS {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "only {} of {OPS} operations reached the destination",
            effects.len()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Handed-back duplicates come back after the rest of a lease (3s).
    let started = Instant::now();
    while !drained().await {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "messages left in the broker after 60s"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let said: Vec<String> = consumers.into_iter().map(stop).collect();
    for i in 0..OPS {
        let key = idempotency_key(&job, &format!("order-{i}"));
        assert_eq!(server.effects(&key), 1, "{key}");
    }
    let acked: u64 = said.iter().map(|s| count(s, "acked")).sum();
    let effects: u64 = said.iter().map(|s| effects_done(s)).sum();
    assert_eq!(effects, OPS as u64, "effects done, over both: {said:?}");
    assert_eq!(acked, 2 * OPS as u64, "{said:?}");
    for s in &said {
        assert!(count(s, "acked") > 0, "both processes consumed: {s}");
        assert_eq!(count(s, poison_word(s)), 0, "{s}");
    }
    let records = inspect(&db, &job);
    assert_eq!(records.len(), OPS);
    assert!(records.values().all(|r| r["state"] == "completed"));
}

/// `consume` with a job timeout at least the broker's redelivery timeout
/// refuses to start, naming both values; `check` reads and names them too.
pub fn refused(target: &Target, setting: &str) {
    let db = sqlite_url();
    let job = unique_job("refused");
    let mut args = vec!["consume".to_owned()];
    args.extend(target.consume.iter().cloned());
    args.extend(
        [
            "--job",
            &job,
            "--http",
            "http://127.0.0.1:9",
            "--effect",
            "keyed",
            "--lease",
            "30s",
            "--timeout",
            "10s",
        ]
        .map(str::to_owned),
    );
    let out = run(&db, &args, &target.env);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(said.contains(&format!("{setting} (5s)")), "{said}");
    assert!(said.contains("job timeout (10s)"), "{said}");

    let dir = tempfile::tempdir().unwrap().keep();
    let path = dir.join("onceonly.toml");
    let toml = format!("[jobs.{job}]\neffect = \"keyed\"\nlease = \"30s\"\ntimeout = \"10s\"\n");
    std::fs::write(&path, toml).unwrap();
    let mut args = vec![
        "check".to_owned(),
        "--config".to_owned(),
        path.display().to_string(),
    ];
    args.extend(target.check.iter().cloned());
    let out = run(&db, &args, &target.env);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains(&format!("job {job}: rule broken: ")),
        "{said}"
    );
    assert!(said.contains(&format!("{setting} (5s)")), "{said}");
    assert!(said.contains("job timeout (10s)"), "{said}");
}

/// `replay --queue` with 100 concurrent runs: exit 0, the JSON of
/// `replay --json` naming the queue, and a consumer killed by SIGKILL
/// after the effect leaves one effect after the broker's redelivery for
/// the local, keyed and lookup jobs.
/// Concurrent runs of the replay test: enough for both consumer processes
/// to race on several operations; `--runs 100` is the documented command
/// in docs/queues.md.
const REPLAY_RUNS: u64 = 8;

pub fn replay(target: &Target, queue: &str) {
    let db = sqlite_url();
    let dir = tempfile::tempdir().unwrap().keep();
    let json = dir.join("replay.json");
    let mut args = vec!["replay".to_owned()];
    args.extend(target.replay.iter().cloned());
    args.extend(["--runs", &REPLAY_RUNS.to_string(), "--json"].map(str::to_owned));
    args.push(json.display().to_string());
    let out = run(&db, &args, &target.env);
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc["queue"], queue);
    assert_eq!(doc["pass"], true);
    assert_eq!(doc["runs"], REPLAY_RUNS);
    let entries = doc["entries"].as_array().unwrap();
    for field in [
        "scenario",
        "kind",
        "allowed",
        "guarded",
        "naive",
        "records",
        "verdict",
        "checks",
        "processes",
        "sigkills",
    ] {
        assert!(entries.iter().all(|e| e.get(field).is_some()), "{field}");
    }
    for kind in ["local", "keyed", "lookup"] {
        let killed = entries
            .iter()
            .find(|e| {
                e["scenario"] == "crash_after_effect"
                    && e["variant"] == "SIGKILL"
                    && e["kind"] == kind
            })
            .unwrap_or_else(|| panic!("no SIGKILL-after-effect entry for {kind}"));
        assert_eq!(killed["guarded"]["total"], 1, "{kind}: {killed}");
        assert_eq!(
            killed["records"]["states"]["completed"], 1,
            "{kind}: {killed}"
        );
        // One worker process killed for the naive version, one for the guarded.
        assert_eq!(killed["sigkills"], 2, "{kind}: {killed}");
    }
    let concurrent: Vec<_> = entries
        .iter()
        .filter(|e| e["scenario"] == "concurrent" && e["verdict"] != "not_applicable")
        .collect();
    assert!(!concurrent.is_empty());
    for e in &concurrent {
        assert_eq!(e["runs"], REPLAY_RUNS, "{e}");
        assert_eq!(e["verdict"], "pass", "{e}");
        // Two consumer processes for the naive version, two for the guarded,
        // and both guarded ones consumed messages.
        assert_eq!(e["processes"], 4, "{e}");
        let checks = e["checks"].as_array().unwrap();
        let both = checks
            .iter()
            .find(|c| c["name"] == "two or more processes consumed messages")
            .unwrap_or_else(|| panic!("no process check: {e}"));
        assert_eq!(both["passed"], true, "{e}");
    }
    let summary = &doc["summary"];
    assert!(summary["processes"].as_u64().unwrap() >= 4 * concurrent.len() as u64);
    assert!(summary["sigkills"].as_u64().unwrap() >= 6);
    assert!(said.contains("killed by SIGKILL"), "{said}");
}

/// A destination that answers after 7s, consumed under `--timeout 10s
/// --heartbeat 1s`: one POST, the operation completed and its message
/// acked once (each request used to be cut at half the timeout, 5s, and
/// the message delivered again and again).
pub async fn slow_destination_completes_once(target: &Target, publish: impl AsyncFn(Vec<u8>)) {
    let db = sqlite_url();
    let out = oo(&db, &["migrate"]);
    assert!(out.status.success(), "{}", text(&out));
    let server = TestServer::start(Mode::Keyed).await.unwrap();
    server.delay_after_create(Duration::from_secs(7));
    let job = unique_job("slow");
    let mut args = vec!["consume".to_owned()];
    args.extend(target.consume.iter().cloned());
    args.extend(
        [
            "--job",
            &job,
            "--http",
            &server.base_url(),
            "--effect",
            "keyed",
            "--lease",
            "30s",
            "--timeout",
            "10s",
            "--heartbeat",
            "1s",
            "--workers",
            "1",
        ]
        .map(str::to_owned),
    );
    let consumer = spawn_with(&db, &args, &target.env);
    publish(onceonly_consume::envelope_body(
        "order-slow",
        &serde_json::json!({ "order": 7 }),
    ))
    .await;
    let started = Instant::now();
    while server.posts() == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "nothing sent within 20s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // SIGTERM while the 7s POST is in flight: it finishes, then exit 0
    // (`stop` checks the exit), the message acked.
    let said = stop(consumer);
    assert!(
        said.contains("onceonly consume: stopping (SIGTERM or Ctrl-C): no new messages are received; those in hand finish, each within --timeout, then the summary and exit 0"),
        "{said}"
    );
    let record = &inspect(&db, &job)["order-slow"];
    assert_eq!(record["state"], "completed", "{record}\n{said}");
    assert_eq!(server.posts(), 1, "one POST: {said}");
    assert_eq!(count(&said, "acked"), 1, "{said}");
    assert_eq!(count(&said, "handed back"), 0, "{said}");
    assert_eq!(inspect(&db, &job)["order-slow"]["attempts"], 1);
}

/// Poison through `onceonly consume`: a key that is there but bad is shown
/// escaped in the ERROR line with the reason, a body over 256 KiB is
/// refused naming its size, and the summary says `poison_action`
/// (`terminated` or `dead-lettered`).
pub async fn poison_lines_name_the_bad_key(
    target: &Target,
    poison_action: &str,
    publish: impl AsyncFn(Vec<u8>),
) {
    let db = sqlite_url();
    let job = unique_job("poison");
    let mut args = vec!["consume".to_owned()];
    args.extend(target.consume.iter().cloned());
    args.extend(
        [
            "--job",
            &job,
            "--http",
            "http://127.0.0.1:9",
            "--effect",
            "keyed",
            "--timeout",
            "2s",
            "--workers",
            "1",
        ]
        .map(str::to_owned),
    );
    let consumer = spawn_with(&db, &args, &target.env);
    publish(br#"{"key": "ord\u0007er", "payload": 1}"#.to_vec()).await;
    let big = format!(
        r#"{{"key": "big", "payload": "{}"}}"#,
        "x".repeat(300 * 1024)
    );
    let size = big.len();
    publish(big.into_bytes()).await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let said = plain(&stop(consumer));
    let bad = said
        .lines()
        .find(|l| l.contains("bad key"))
        .unwrap_or_else(|| panic!("no poison line for the bad key: {said}"));
    assert!(
        bad.contains(&format!("poison message: {poison_action}")),
        "{bad}"
    );
    assert!(bad.contains(r#"key="ord\u{7}er""#), "{bad}");
    assert!(bad.contains("control character"), "{bad}");
    assert!(
        said.contains(&format!(
            "the body is {size} bytes, over the limit of 262144 bytes (256 KiB)"
        )),
        "{said}"
    );
    assert_eq!(count(&said, poison_action), 2, "{said}");
}
