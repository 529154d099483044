//! A destination's credentials stay at its origin: a withdraw URL built
//! from its answer (`url = "{ref}"`) that points at another origin is
//! refused before anything is sent, unless the settings list that origin
//! in `allowed_origins`. Two real listeners: the destination on 127.0.0.1,
//! the other host on 127.0.0.2.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use onceonly::{Effect, EffectCtx, WithdrawOutcome};
use onceonly_http::shape::WithdrawSpec;
use onceonly_http::{ClientOptions, HttpDestination, Shape, ShapeSpec};
use support::{RawServer, Reply};

const TOKEN: &str = "tok-origin-secret";

fn spec(allowed: Vec<String>) -> ShapeSpec {
    ShapeSpec {
        headers: BTreeMap::from([("Authorization".into(), "Bearer {env.TOKEN}".into())]),
        withdraw: Some(WithdrawSpec {
            method: None,
            url: "{ref}".into(),
            headers: BTreeMap::new(),
            gone: Vec::new(),
        }),
        allowed_origins: allowed,
        ..ShapeSpec::test_protocol()
    }
}

fn destination(base: &RawServer, spec: &ShapeSpec) -> HttpDestination {
    let shape = Shape::resolve(spec, |name| (name == "TOKEN").then(|| TOKEN.to_owned())).unwrap();
    let options = ClientOptions {
        request_timeout: Duration::from_secs(5),
        ca_cert: None,
    };
    HttpDestination::with_shape(&base.base_url(), shape, &options).unwrap()
}

fn ctx() -> EffectCtx {
    EffectCtx::detached("send", "k1", serde_json::Value::Null)
}

#[tokio::test]
async fn a_reference_pointing_at_another_origin_gets_nothing() {
    let home = RawServer::start("127.0.0.1", Reply::Body(200, "{}".into())).await;
    let other = RawServer::start("127.0.0.2", Reply::Body(200, "{}".into())).await;
    let dest = destination(&home, &spec(Vec::new()));
    let stolen = format!("{}/stolen", other.base_url());
    match dest.withdraw(&ctx(), &stolen).await {
        WithdrawOutcome::NotWithdrawn(why) => {
            assert!(
                why.contains(&format!("points at {}", other.base_url())),
                "{why}"
            );
            assert!(
                why.contains(&format!("origin {}", home.base_url())),
                "{why}"
            );
            assert!(why.contains("allowed_origins"), "{why}");
            assert!(!why.contains(TOKEN), "{why}");
        }
        WithdrawOutcome::Withdrawn => panic!("a withdraw at another origin was sent"),
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(other.requests(), 0, "a request reached the other origin");
    assert_eq!(home.requests(), 0);

    // Another port on the same host is another origin too.
    let next_door = RawServer::start("127.0.0.1", Reply::Body(200, "{}".into())).await;
    let moved = format!("{}/items/1", next_door.base_url());
    assert!(matches!(
        dest.withdraw(&ctx(), &moved).await,
        WithdrawOutcome::NotWithdrawn(_)
    ));
    assert_eq!(next_door.requests(), 0);

    // The destination's own origin takes it, credential and all.
    let own = format!("{}/items/1", home.base_url());
    assert_eq!(
        dest.withdraw(&ctx(), &own).await,
        WithdrawOutcome::Withdrawn
    );
    assert_eq!(home.requests(), 1);
    assert!(home.heads.lock().unwrap()[0].contains(&format!("authorization: bearer {TOKEN}")));
}

#[tokio::test]
async fn an_origin_the_settings_allow_by_name_is_reached() {
    let home = RawServer::start("127.0.0.1", Reply::Body(200, "{}".into())).await;
    let files = RawServer::start("127.0.0.2", Reply::Body(204, String::new())).await;
    let dest = destination(&home, &spec(vec![files.base_url()]));
    let item = format!("{}/items/9", files.base_url());
    assert_eq!(
        dest.withdraw(&ctx(), &item).await,
        WithdrawOutcome::Withdrawn
    );
    assert_eq!(files.requests(), 1);
    assert_eq!(home.requests(), 0);
}

#[test]
fn an_allowed_origin_must_be_an_origin() {
    for bad in [
        "files.example.com",
        "https://files.example.com/path",
        "ftp://x",
    ] {
        let err = Shape::resolve(&spec(vec![bad.into()]), |_| Some("t".into())).unwrap_err();
        assert!(err.contains("allowed_origins"), "{bad}: {err}");
    }
}
