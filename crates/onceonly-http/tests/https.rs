//! The HTTP destination over HTTPS, against the test destination served
//! with a certificate from a CA made here: trusted through the CA file,
//! refused without it, and the refusal is "not sent" (a failed handshake
//! comes before any byte of the request).

use std::time::Duration;

use onceonly::{Effect, EffectCtx, EffectOutcome};
use onceonly_http::test_server::{Mode, TestServer};
use onceonly_http::{ClientOptions, HttpDestination, Shape};

fn options(ca_cert: Option<std::path::PathBuf>) -> ClientOptions {
    ClientOptions {
        request_timeout: Duration::from_secs(5),
        ca_cert,
    }
}

#[tokio::test]
async fn trusted_through_the_ca_file_and_refused_without_it() {
    let ca = onceonly_http::test_ca::make();
    let server = TestServer::start_tls(Mode::Keyed, &ca.server)
        .await
        .unwrap();
    let base = server.base_url();
    assert!(base.starts_with("https://127.0.0.1:"), "{base}");
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, &ca.ca_pem).unwrap();

    let trusted =
        HttpDestination::with_shape(&base, Shape::default(), &options(Some(ca_file))).unwrap();
    let ctx = EffectCtx::detached("mail", "k1", serde_json::json!({"to": "a@b"}));
    match trusted.perform(&ctx).await {
        EffectOutcome::Done {
            external_ref: Some(r),
            ..
        } => assert!(r.starts_with("item-"), "{r}"),
        other => panic!("over HTTPS with the CA trusted: {other:?}"),
    }
    assert_eq!(server.effects("mail:k1"), 1);

    let untrusted = HttpDestination::with_shape(&base, Shape::default(), &options(None)).unwrap();
    let ctx2 = EffectCtx::detached("mail", "k2", serde_json::json!({"to": "a@b"}));
    match untrusted.perform(&ctx2).await {
        EffectOutcome::NotSent(why) => {
            assert!(why.contains("before sending"), "{why}");
            assert!(
                why.to_lowercase().contains("certificate"),
                "the cause is named: {why}"
            );
        }
        other => panic!("an untrusted certificate must be not sent, never unknown: {other:?}"),
    }
    assert_eq!(
        server.effects("mail:k2"),
        0,
        "nothing reached the destination"
    );
    assert_eq!(server.posts(), 1, "the refused request was never written");
}

#[tokio::test]
async fn a_bad_ca_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.pem");
    let err = HttpDestination::with_shape(
        "https://127.0.0.1:9",
        Shape::default(),
        &options(Some(missing.clone())),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("--ca-cert") && err.contains("nope.pem") && err.contains("cannot read"),
        "{err}"
    );
    let empty = dir.path().join("empty.pem");
    std::fs::write(&empty, "not a certificate\n").unwrap();
    let err = HttpDestination::with_shape(
        "https://127.0.0.1:9",
        Shape::default(),
        &options(Some(empty)),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("empty.pem") && err.contains("no PEM certificate"),
        "{err}"
    );
}

/// What `.ci/steps/35-https.sh` relies on to run the replay and crash tests
/// over HTTPS: with `ONCEONLY_TEST_TLS_CERT`/`_KEY` set, `TestServer::start`
/// serves https://, and the default destination trusts it through the
/// system's roots (`SSL_CERT_FILE`).
#[tokio::test]
async fn the_environment_switches_the_test_destination_to_https() {
    if std::env::var_os("ONCEONLY_TEST_TLS_CERT").is_none() {
        eprintln!(
            "NOTE: the_environment_switches_the_test_destination_to_https checks nothing \
             without ONCEONLY_TEST_TLS_CERT (.ci/steps/35-https.sh sets it)"
        );
        return;
    }
    let server = TestServer::start(Mode::Keyed).await.unwrap();
    assert!(
        server.base_url().starts_with("https://"),
        "{}",
        server.base_url()
    );
    let d = HttpDestination::new(&server.base_url(), Duration::from_secs(5)).unwrap();
    let ctx = EffectCtx::detached("env", "k", serde_json::Value::Null);
    let outcome = d.perform(&ctx).await;
    assert!(matches!(outcome, EffectOutcome::Done { .. }), "{outcome:?}");
}
