//! `onceonly run --metrics ADDR`: a real relay process serves Prometheus
//! metrics while it runs, and the counters move as it works.

mod common;

use std::time::{Duration, Instant};

use common::*;
use onceonly_http::test_server::{Mode, TestServer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A port nobody listens on right now.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// GET /metrics: the status line and the body, or the connect error.
async fn scrape(port: u16) -> std::io::Result<(String, String)> {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    Ok((head.to_owned(), body.to_owned()))
}

/// The value of one sample, such as `onceonly_completions_total{job_type="x"}`.
fn sample(body: &str, series: &str) -> u64 {
    body.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no sample {series} in\n{body}"))
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_move_while_the_relay_runs() {
    const OPS: u64 = 30;
    let db = sqlite_url();
    let server = TestServer::start(Mode::Keyed).await.unwrap();
    server.delay_after_create(Duration::from_millis(100));
    let job = unique_job("metrics");
    enqueue_many(&db, &job, OPS as usize);
    let port = free_port();
    let (base, addr) = (server.base_url(), format!("127.0.0.1:{port}"));
    let mut relay = spawn(
        &db,
        &[
            "run",
            "--job",
            &job,
            "--http",
            &base,
            "--effect",
            "keyed",
            "--workers",
            "1",
            "--metrics",
            &addr,
        ],
    );
    let completions = format!("onceonly_completions_total{{job_type=\"{job}\"}}");
    let claims = format!("onceonly_claims_total{{job_type=\"{job}\"}}");
    let latency_count = format!("onceonly_effect_seconds_count{{job_type=\"{job}\"}}");
    let inf = format!("onceonly_effect_seconds_bucket{{job_type=\"{job}\",le=\"+Inf\"}}");

    // First scrape as soon as the endpoint answers: one worker at ~100ms an
    // operation takes about 3s for all of them.
    let started = Instant::now();
    let (head, first) = loop {
        match scrape(port).await {
            Ok(got) => break got,
            Err(e) => {
                if let Ok(Some(status)) = relay.try_wait() {
                    panic!("the relay exited ({status}) before serving metrics");
                }
                assert!(
                    started.elapsed() < Duration::from_secs(20),
                    "metrics endpoint never answered: {e}"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/plain; version=0.0.4"),
        "{head}"
    );
    assert!(
        first.contains("# TYPE onceonly_completions_total counter"),
        "{first}"
    );
    assert!(
        first.contains("# TYPE onceonly_effect_seconds histogram"),
        "{first}"
    );
    let (done_first, count_first) = (sample(&first, &completions), sample(&first, &latency_count));
    assert!(
        done_first < OPS,
        "all done before the first scrape:\n{first}"
    );

    // Again once the relay has done everything.
    let last = loop {
        let (_, body) = scrape(port)
            .await
            .expect("the endpoint stays up while the relay runs");
        if sample(&body, &completions) == OPS {
            break body;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the relay did not complete {OPS} operations:\n{body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(sample(&last, &completions) > done_first);
    assert!(sample(&last, &latency_count) > count_first, "{last}");
    assert_eq!(sample(&last, &latency_count), OPS, "{last}");
    assert_eq!(sample(&last, &inf), OPS, "{last}");
    assert_eq!(sample(&last, &claims), OPS, "{last}");
    let quickest = format!("onceonly_effect_seconds_bucket{{job_type=\"{job}\",le=\"0.05\"}}");
    assert_eq!(
        sample(&last, &quickest),
        0,
        "each took the destination's 100ms:\n{last}"
    );
    for line in last
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        assert!(line.contains(&format!("job_type=\"{job}\"")), "{line}");
    }

    // SIGTERM: a clean stop, exit 0, and the endpoint goes with the relay.
    let pid = relay.id().to_string();
    let kill = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(kill.success());
    let out = tokio::task::spawn_blocking(move || relay.wait_with_output().unwrap())
        .await
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("metrics at http://{addr}/metrics")),
        "{stderr}"
    );
    assert!(stderr.contains("onceonly run: completed 30,"), "{stderr}");
    assert!(
        scrape(port).await.is_err(),
        "metrics still served after the relay exited"
    );
    let records = inspect(&db, &job);
    assert!(records.values().all(|r| r["state"] == "completed"));
}

/// An address that cannot be bound is refused before anything is claimed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_address_in_use_fails_before_the_relay_starts() {
    let db = sqlite_url();
    let server = TestServer::start(Mode::Keyed).await.unwrap();
    let job = unique_job("metrics-busy");
    enqueue_many(&db, &job, 3);
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let base = server.base_url();
    let out = tokio::task::spawn_blocking({
        let (db, job) = (db.clone(), job.clone());
        move || {
            oo(
                &db,
                &[
                    "run",
                    "--job",
                    &job,
                    "--http",
                    &base,
                    "--effect",
                    "keyed",
                    "--drain",
                    "--metrics",
                    &addr,
                ],
            )
        }
    })
    .await
    .unwrap();
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--metrics"),
        "{}",
        text(&out)
    );
    assert_eq!(server.posts(), 0);
    let records = inspect(&db, &job);
    assert!(
        records.values().all(|r| r["state"] == "queued"),
        "{records:?}"
    );
}
