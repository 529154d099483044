//! A request's time limit: one request may use what is left of `--timeout`
//! (or `--request-timeout` when given), and a cut request says which limit
//! cut it. Real `onceonly run` processes against a real slow destination.

mod common;

use std::time::{Duration, Instant};

use common::*;
use onceonly_http::test_server::{Mode, TestServer};

async fn run_cli(db: &str, args: Vec<String>) -> std::process::Output {
    let db = db.to_owned();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        oo(&db, &args)
    })
    .await
    .unwrap()
}

/// The child's output if it exits within `limit`; killed (None) otherwise.
async fn within(mut child: std::process::Child, limit: Duration) -> Option<std::process::Output> {
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > limit {
            child.kill().unwrap();
            child.wait().unwrap();
            return None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Some(child.wait_with_output().unwrap())
}

fn run_args(job: &str, base: &str, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = [
        "run",
        "--job",
        job,
        "--http",
        base,
        "--effect",
        "keyed",
        "--workers",
        "1",
        "--drain",
    ]
    .map(str::to_owned)
    .to_vec();
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    args
}

/// A destination that answers after 7s under `--timeout 10s`: one POST,
/// completed on the first attempt (it used to be cut at 5s, half the
/// timeout, and sent again and again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_answer_within_the_timeout_completes_with_one_post() {
    let db = sqlite_url();
    let server = TestServer::start(Mode::Keyed).await.unwrap();
    server.delay_after_create(Duration::from_secs(7));
    let job = unique_job("slow");
    enqueue_many(&db, &job, 1);
    let args = run_args(
        &job,
        &server.base_url(),
        &["--timeout", "10s", "--lease", "30s"],
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let relay = spawn(&db, &args);
    // Bounded: the old relay never finished (each request cut at 5s).
    let out = within(relay, Duration::from_secs(40)).await;
    assert!(
        out.as_ref().is_some_and(|o| o.status.success()),
        "the relay did not drain within 40s ({} POSTs): {:?}",
        server.posts(),
        out.as_ref().map(text)
    );
    assert_eq!(server.posts(), 1, "one POST for the operation");
    let record = &inspect(&db, &job)["op-0"];
    assert_eq!(record["state"], "completed", "{record}");
    assert_eq!(record["attempts"], 1, "{record}");
}

/// The limit that cut a request is named in the record's error: the
/// request's own (`--request-timeout`), or the attempt's (`--timeout`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_request_names_the_limit_that_cut_it() {
    for (extra, said) in [
        (
            &["--timeout", "8s", "--request-timeout", "1s"][..],
            "the request timeout (1s) ran out",
        ),
        (
            &["--timeout", "2s"][..],
            "timed out after 2s (the job timeout: the whole attempt",
        ),
    ] {
        let db = sqlite_url();
        let server = TestServer::start(Mode::Keyed).await.unwrap();
        server.delay_after_create(Duration::from_secs(30));
        let job = unique_job("cut");
        enqueue_many(&db, &job, 1);
        let mut args = run_args(&job, &server.base_url(), extra);
        args.retain(|a| a != "--drain");
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut relay = spawn(&db, &args);
        let started = Instant::now();
        let error = loop {
            let record = &inspect(&db, &job)["op-0"];
            if let Some(error) = record["error"].as_str() {
                break error.to_owned();
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "no error recorded: {record}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        relay.kill().unwrap();
        relay.wait().unwrap();
        assert!(error.contains(said), "{extra:?}: {error}");
    }
}

/// `--request-timeout` longer than `--timeout` can never apply: refused,
/// naming both.
#[tokio::test]
async fn a_request_timeout_over_the_job_timeout_is_refused() {
    let db = sqlite_url();
    let job = unique_job("refused");
    let args = run_args(
        &job,
        "http://127.0.0.1:9",
        &["--timeout", "10s", "--request-timeout", "20s"],
    );
    let out = run_cli(&db, args).await;
    let said = text(&out);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(
        said.contains("--request-timeout (20s) is longer than the job timeout (10s)"),
        "{said}"
    );
}
