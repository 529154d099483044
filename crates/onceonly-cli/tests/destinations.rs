//! `run` and `cancel` against real destinations: HTTPS with a CA made
//! here (trusted through --ca-cert or the settings file, refused without),
//! a job's request shape from onceonly.toml with a bearer token from the
//! environment, a missing variable refusing to start, and the token
//! searched for in everything the run leaves behind.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use onceonly_http::test_server::{Mode, TestServer};

/// Runs the binary with extra environment variables, to completion.
fn oo_env(db: &str, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    Command::new(bin())
        .arg("--db")
        .arg(db)
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

/// A CA made here and a destination serving a certificate it signed.
async fn https_destination(dir: &Path) -> (TestServer, PathBuf) {
    let ca = onceonly_http::test_ca::make();
    let server = TestServer::start_tls(Mode::Keyed, &ca.server)
        .await
        .unwrap();
    let ca_file = dir.join("ca.pem");
    std::fs::write(&ca_file, &ca.ca_pem).unwrap();
    (server, ca_file)
}

fn db_dir(db: &str) -> PathBuf {
    Path::new(db.trim_start_matches("sqlite://"))
        .parent()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn run_over_https_trusts_the_ca_file_and_cancel_withdraws_through_the_config() {
    let db = sqlite_url();
    let dir = db_dir(&db);
    let (server, ca_file) = https_destination(&dir).await;
    let base = server.base_url();
    assert!(base.starts_with("https://"));
    enqueue_many(&db, "tls", 5);
    let args = [
        "run",
        "--job",
        "tls",
        "--http",
        &base,
        "--effect",
        "keyed",
        "--drain",
        "--ca-cert",
    ];
    let (db2, ca2) = (db.clone(), ca_file.display().to_string());
    let mut full: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    full.push(ca2);
    let out = blocking(move || {
        let a: Vec<&str> = full.iter().map(String::as_str).collect();
        oo_env(&db2, &a, &[("SSL_CERT_FILE", "/nonexistent")])
    })
    .await;
    assert!(out.status.success(), "{}", text(&out));
    for i in 0..5 {
        assert_eq!(server.effects(&format!("tls:op-{i}")), 1, "op-{i}");
    }
    // cancel takes the destination and the CA from the settings file.
    let config = dir.join("onceonly.toml");
    std::fs::write(
        &config,
        format!("[jobs.tls]\neffect = \"keyed\"\ndestination = \"{base}\"\nca_cert = \"ca.pem\"\n"),
    )
    .unwrap();
    let config = config.display().to_string();
    let (db2, c2) = (db.clone(), config.clone());
    let out = blocking(move || {
        oo_env(
            &db2,
            &["cancel", "--job", "tls", "--key", "op-0", "--config", &c2],
            &[("SSL_CERT_FILE", "/nonexistent")],
        )
    })
    .await;
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("withdrawn"), "{}", text(&out));
    assert_eq!(server.live("tls:op-0"), 0);
    assert_eq!(inspect(&db, "tls")["op-0"]["state"], "cancelled");
}

#[tokio::test]
async fn run_without_the_ca_sends_nothing_and_says_why() {
    let db = sqlite_url();
    let dir = db_dir(&db);
    let (server, _ca_file) = https_destination(&dir).await;
    enqueue_many(&db, "untrusted", 1);
    let mut child = Command::new(bin())
        .args([
            "--db",
            &db,
            "run",
            "--job",
            "untrusted",
            "--http",
            &server.base_url(),
            "--effect",
            "keyed",
        ])
        .env("SSL_CERT_FILE", "/nonexistent")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let error = loop {
        let db2 = db.clone();
        let rows = blocking(move || inspect(&db2, "untrusted")).await;
        let row = &rows["op-0"];
        if let Some(e) = row["error"].as_str() {
            assert_eq!(
                row["state"], "queued",
                "not sent goes back to the queue: {row}"
            );
            break e.to_owned();
        }
        assert!(Instant::now() < deadline, "no attempt recorded: {row}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let _ = Command::new("kill").arg(child.id().to_string()).status();
    let _ = blocking(move || child.wait()).await;
    assert!(error.contains("before sending"), "{error}");
    assert!(error.to_lowercase().contains("certificate"), "{error}");
    assert_eq!(server.posts(), 0, "no request reached the destination");
}

/// A destination that wants `Authorization: Bearer TOKEN` and echoes the
/// header back in its refusal, as careless APIs do.
async fn echoing_destination(token: &'static str) -> (String, Arc<Mutex<Vec<String>>>) {
    use axum::http::{HeaderMap, StatusCode};
    use axum::routing::post;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen2 = seen.clone();
    let app = axum::Router::new().route(
        "/api/{job}/send",
        post(move |headers: HeaderMap| {
            let seen = seen2.clone();
            async move {
                let auth = headers
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_owned();
                seen.lock().unwrap().push(auth.clone());
                assert_eq!(auth, format!("Bearer {token}"));
                (
                    StatusCode::UNPROCESSABLE_ENTITY,
                    format!("rejected request with Authorization: {auth}"),
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (base, seen)
}

#[tokio::test]
async fn secrets_never_leave_the_process() {
    const TOKEN: &str = "sk_live_5bd3e9a0c1f24e7d";
    let (base, seen) = echoing_destination(TOKEN).await;
    let db = sqlite_url();
    let dir = db_dir(&db);
    let config = dir.join("onceonly.toml");
    std::fs::write(
        &config,
        format!(
            "[jobs.pay]\neffect = \"keyed\"\ndestination = \"{base}\"\n\n[jobs.pay.http]\n\
             url = \"{{base}}/api/{{job}}/send\"\n\
             headers = {{ Authorization = \"Bearer {{env.PAY_TOKEN}}\" }}\n"
        ),
    )
    .unwrap();
    enqueue_many(&db, "pay", 2);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let metrics = format!("127.0.0.1:{port}");
    let child = Command::new(bin())
        .args(["--db", &db, "run", "--job", "pay", "--config"])
        .arg(&config)
        .args(["--metrics", &metrics])
        .env("PAY_TOKEN", TOKEN)
        .env("RUST_LOG", "debug")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let db2 = db.clone();
        let rows = blocking(move || inspect(&db2, "pay")).await;
        if rows.values().all(|r| r["state"] == "failed") {
            break;
        }
        assert!(Instant::now() < deadline, "{rows:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let scraped = reqwest::get(format!("http://{metrics}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(scraped.contains("onceonly_"), "{scraped}");
    let _ = Command::new("kill").arg(child.id().to_string()).status();
    let out = blocking(move || child.wait_with_output().unwrap()).await;
    assert_eq!(seen.lock().unwrap().len(), 2, "the token was sent");

    let mut everything = vec![
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        scraped,
    ];
    for args in [
        vec!["inspect", "--job", "pay", "--json"],
        vec!["inspect"],
        vec!["history", "--job", "pay", "--key", "op-0", "--json"],
        vec!["history", "--job", "pay", "--key", "op-1"],
    ] {
        let o = oo(&db, &args);
        assert!(o.status.success(), "{}", text(&o));
        everything.push(text(&o));
    }
    let rows = inspect(&db, "pay");
    let error = rows["op-0"]["error"].as_str().unwrap();
    assert!(
        error.contains("422") && error.contains("Bearer [secret]"),
        "{error}"
    );
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            continue;
        }
        everything.push(String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned());
    }
    for (i, text) in everything.iter().enumerate() {
        assert!(
            !text.contains(TOKEN),
            "the token leaked into item {i}: {text}"
        );
    }
}

#[tokio::test]
async fn a_missing_variable_refuses_to_start_and_a_keyless_shape_cannot_be_keyed() {
    let db = sqlite_url();
    let dir = db_dir(&db);
    let config = dir.join("onceonly.toml");
    std::fs::write(
        &config,
        "[jobs.pay]\neffect = \"keyed\"\ndestination = \"https://pay.example.com\"\n\n[jobs.pay.http]\n\
         headers = { \"X-Api-Key\" = \"{env.ONCEONLY_TEST_SURELY_UNSET}\" }\n",
    )
    .unwrap();
    let c = config.display().to_string();
    let out = oo(&db, &["run", "--job", "pay", "--config", &c, "--drain"]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("ONCEONLY_TEST_SURELY_UNSET not set"),
        "{}",
        text(&out)
    );
    assert!(!dir.join("cli.db").exists(), "nothing was written");

    // A credential over plain HTTP to another host is refused at start.
    let out = oo_env(
        &db,
        &[
            "run",
            "--job",
            "pay",
            "--config",
            &c,
            "--http",
            "http://pay.example.com",
            "--drain",
        ],
        &[("ONCEONLY_TEST_SURELY_UNSET", "k")],
    );
    assert!(text(&out).contains("plain http://"), "{}", text(&out));
    assert!(!dir.join("cli.db").exists(), "nothing was written");

    std::fs::write(
        &config,
        "[jobs.hook]\neffect = \"keyed\"\ndestination = \"https://hooks.example.com\"\n\n[jobs.hook.http]\n\
         idempotency_header = \"none\"\nreference = \"none\"\n",
    )
    .unwrap();
    let out = oo(&db, &["check", "--config", &c]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("jobs.hook.http") && text(&out).contains("cannot be keyed"),
        "{}",
        text(&out)
    );
    // And on the command line, over the default shape.
    let out = oo(
        &db,
        &[
            "run",
            "--job",
            "x",
            "--http",
            "http://127.0.0.1:9",
            "--effect",
            "keyed",
            "--idempotency-header",
            "none",
        ],
    );
    assert!(
        !out.status.success() && text(&out).contains("cannot be keyed"),
        "{}",
        text(&out)
    );
}
