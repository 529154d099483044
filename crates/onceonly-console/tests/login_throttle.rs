//! Wrong console tokens slow down the address they come from: after the
//! free attempts every try is answered 429 with Retry-After, even one with
//! the right token, until the wait is over; then the right token logs in.
//! Another address is not slowed. Each refusal is logged with the client's
//! address, never the token.

mod common;

use std::io::Write;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use onceonly_console::{LoginThrottle, Options};

const TOKEN: &str = "s3cret-console-token";
const WRONG: &str = "wrong-guess-token";

/// The log lines the console writes, kept for the test to read.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

fn client_from(addr: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(addr.parse::<IpAddr>().unwrap())
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

async fn login(c: &reqwest::Client, base: &str, token: &str) -> reqwest::Response {
    c.post(format!("{base}/login"))
        .form(&[("name", "mallory"), ("token", token), ("next", "/")])
        .send()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_tokens_slow_down_their_address_only() {
    let logs = Logs::default();
    let writer = logs.clone();
    tracing_subscriber::fmt()
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .init();
    let (url, store) = sqlite().await;
    let mut options = Options::new(&url);
    options.token = Some(TOKEN.into());
    options.login_throttle = LoginThrottle {
        first_wait: Duration::from_secs(2),
        ..LoginThrottle::default()
    };
    let base = serve(store, options).await;
    let attacker = client_from("127.0.0.1");

    let mut statuses = Vec::new();
    let mut retry_after = 0;
    for _ in 0..20 {
        let res = login(&attacker, &base, WRONG).await;
        statuses.push(res.status().as_u16());
        if res.status() == 429 {
            retry_after = res.headers()["retry-after"]
                .to_str()
                .unwrap()
                .parse()
                .unwrap();
            let page = res.text().await.unwrap();
            assert!(
                page.contains("too many wrong tokens from your address"),
                "{page}"
            );
        }
    }
    assert_eq!(statuses[..5], [401; 5], "five free attempts: {statuses:?}");
    assert_eq!(statuses[5], 429, "the sixth waits: {statuses:?}");
    // Each wrong token after the free ones doubles the wait, so even a slow
    // machine gets only a few more tries in.
    let wrong = statuses.iter().filter(|&&s| s == 401).count();
    assert!(
        wrong <= 8,
        "{wrong} tokens compared in 20 tries: {statuses:?}"
    );
    assert!(retry_after >= 1, "Retry-After: {retry_after}");

    // Tries sent in parallel are counted before any token is compared.
    let burst = client_from("127.0.0.3");
    let tries: Vec<_> = (0..50)
        .map(|_| {
            let (c, base) = (burst.clone(), base.clone());
            tokio::spawn(async move { login(&c, &base, WRONG).await.status().as_u16() })
        })
        .collect();
    let mut statuses = Vec::new();
    for t in tries {
        statuses.push(t.await.unwrap());
    }
    let compared = statuses.iter().filter(|&&s| s == 401).count();
    assert!(
        compared <= 8,
        "{compared} of 50 parallel tries compared: {statuses:?}"
    );

    // Another address is not slowed.
    let other = client_from("127.0.0.2");
    assert_eq!(login(&other, &base, WRONG).await.status(), 401);
    assert_eq!(login(&other, &base, TOKEN).await.status(), 303);

    // The right token while waiting is refused too; after the wait it works.
    let res = login(&attacker, &base, TOKEN).await;
    assert_eq!(res.status(), 429);
    let wait: u64 = res.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    tokio::time::sleep(Duration::from_secs(wait)).await;
    assert_eq!(login(&attacker, &base, TOKEN).await.status(), 303);

    let logs = logs.text();
    assert!(
        !logs.contains(WRONG) && !logs.contains(TOKEN),
        "a token logged:\n{logs}"
    );
    assert!(
        logs.lines()
            .any(|l| l.contains("wrong token") && l.contains("client=127.0.0.1")),
        "{logs}"
    );
    assert!(
        logs.lines()
            .any(|l| l.contains("too many wrong tokens") && l.contains("client=127.0.0.1")),
        "{logs}"
    );
    assert!(
        logs.lines()
            .any(|l| l.contains("wrong token") && l.contains("client=127.0.0.2")),
        "{logs}"
    );
}
