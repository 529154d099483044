//! A client cannot hold the console's sockets: a connection whose request
//! headers do not arrive within the header timeout is closed, and so is one
//! whose body does not arrive within the body timeout — hundreds of
//! half-sent requests are all closed, and the console still answers.

mod common;

use std::time::{Duration, Instant};

use common::*;
use onceonly_console::Options;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const LIMIT: Duration = Duration::from_millis(500);
/// How long a test waits for the server to close before calling it held
/// (far above the limit, so a slow machine does not fail it).
const GIVE_UP: Duration = Duration::from_secs(20);
const SOCKETS: usize = 400;

fn options(url: &str) -> Options {
    let mut o = Options::new(url);
    o.header_timeout = LIMIT;
    o.body_timeout = LIMIT;
    o
}

/// Reads until the server closes; what it sent, or `None` if it still
/// held the socket open at `deadline`.
async fn until_closed(conn: &mut TcpStream, deadline: Instant) -> Option<String> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, conn.read(&mut buf)).await {
            Err(_) => return None,
            Ok(Ok(0)) | Ok(Err(_)) => return Some(String::from_utf8_lossy(&got).into_owned()),
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_sent_request_lines_are_closed() {
    let (url, store) = sqlite().await;
    let base = serve(store, options(&url)).await;
    let addr = base.trim_start_matches("http://").to_owned();
    // 400: the client's and the server's ends both count against this one
    // process's descriptors, often limited to 1,024 (the probe in
    // tools/console-probe.py holds 1,100 against the real binary).
    let mut held = Vec::new();
    for i in 0..SOCKETS {
        let mut conn = TcpStream::connect(&addr).await.unwrap();
        // Half a request line, or nothing at all.
        if i % 2 == 0 {
            conn.write_all(b"GET /login HT").await.unwrap();
        }
        held.push(conn);
    }
    let deadline = Instant::now() + GIVE_UP;
    let mut still_open = 0;
    for conn in &mut held {
        if until_closed(conn, deadline).await.is_none() {
            still_open += 1;
        }
    }
    assert_eq!(
        still_open, 0,
        "of 1000 half-sent requests, {still_open} still held"
    );
    // And the console still answers.
    let (status, _) = get(&client(), &format!("{base}/login")).await;
    assert_eq!(status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_half_sent_body_is_closed() {
    let (url, store) = sqlite().await;
    let base = serve(store, options(&url)).await;
    let addr = base.trim_start_matches("http://").to_owned();
    let mut conn = TcpStream::connect(&addr).await.unwrap();
    conn.write_all(
        format!(
            "POST /login HTTP/1.1\r\nHost: {addr}\r\n\
             Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\nname=al"
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    let answer = until_closed(&mut conn, Instant::now() + GIVE_UP)
        .await
        .expect("the connection with a half-sent body is still held");
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("did not arrive within 500ms"), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_kept_alive_connection_is_closed() {
    let (url, store) = sqlite().await;
    let base = serve(store, options(&url)).await;
    let addr = base.trim_start_matches("http://").to_owned();
    let mut conn = TcpStream::connect(&addr).await.unwrap();
    conn.write_all(format!("GET /console.css HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let answer = until_closed(&mut conn, Instant::now() + GIVE_UP)
        .await
        .expect("the kept-alive connection is still held after its request");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}
