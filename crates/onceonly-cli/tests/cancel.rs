//! `onceonly cancel` of a queued operation an earlier claim may have sent:
//! with a destination that can look it up, the item is withdrawn and the
//! operation cancelled; without one, the operation is held (exit 1, saying
//! so and how to resolve it), so that its retry cannot send it again.

mod common;

use std::time::Duration;

use common::*;
use onceonly::{EffectKind, Guard, JobSpec, Outcome, Payload, StalePolicy};
use onceonly_http::test_server::{Mode, TestServer};
use onceonly_http::HttpDestination;
use onceonly_sqlite::SqliteStore;

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

/// A new database and destination holding `mail:op` released after an
/// unknown outcome: one claim under at-least-once, whose POST created the
/// item and then answered 503, so the guard released the row to be redone.
/// Returns them with the queued record.
async fn released_after_sending() -> (String, TestServer, serde_json::Value) {
    let db = sqlite_url();
    let server = TestServer::start(Mode::Searchable).await.unwrap();
    server.unknown_after_create(1);
    let store = SqliteStore::connect(&db).await.unwrap();
    onceonly::Store::migrate(&store).await.unwrap();
    let spec = JobSpec::new("mail", EffectKind::Opaque(StalePolicy::AtLeastOnce));
    let guard = Guard::new(store, spec).unwrap();
    let dest = HttpDestination::new(&server.base_url(), Duration::from_secs(5)).unwrap();
    let outcome = guard.run("op", &Payload::none(), &dest).await.unwrap();
    assert!(matches!(outcome, Outcome::RetryLater { .. }), "{outcome:?}");
    assert_eq!(server.live("mail:op"), 1, "the item was created");
    let before = inspect(&db, "mail")["op"].clone();
    assert_eq!(
        (&before["state"], &before["attempts"]),
        (&"queued".into(), &1.into())
    );
    (db, server, before)
}

#[tokio::test]
async fn a_cancel_after_an_unknown_outcome_looks_at_the_destination() {
    let (db, server, _) = released_after_sending().await;

    let (d, url) = (db.clone(), server.base_url());
    let out = blocking(move || {
        oo(
            &d,
            &["cancel", "--job", "mail", "--key", "op", "--http", &url],
        )
    })
    .await;
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("withdrawn at the destination"),
        "{}",
        text(&out)
    );
    assert_eq!(server.live("mail:op"), 0, "withdrawn");
    let after = inspect(&db, "mail")["op"].clone();
    assert_eq!(after["state"], "cancelled");
    assert!(after["external_ref"].is_string(), "{after}");
}

/// The same queued operation, cancelled with no destination to look it up
/// at: held, not cancelled (exit 1, on stderr, naming the resolve to run),
/// the item left as it is; the printed resolve then works.
#[tokio::test]
async fn a_cancel_without_a_destination_holds_a_queued_operation_claimed_before() {
    let (db, server, before) = released_after_sending().await;

    let d = db.clone();
    let out = blocking(move || oo(&d, &["cancel", "--job", "mail", "--key", "op"])).await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    let resolve = "onceonly resolve --job mail --key op --as cancelled --reason";
    assert!(
        said.contains(
            "mail:op held, not cancelled: it was claimed 1 time(s) and may have been sent"
        ) && said.contains("no destination was given to look it up")
            && said.contains("its retry is stopped")
            && said.contains(resolve)
            && said.contains("--as queued"),
        "{said}"
    );
    assert!(out.stdout.is_empty(), "{}", text(&out));
    let held = inspect(&db, "mail")["op"].clone();
    assert_eq!(
        (&held["state"], &held["token"], &held["attempts"]),
        (&"held".into(), &before["token"], &1.into()),
        "{held}"
    );
    assert_eq!(server.live("mail:op"), 1, "nothing withdrawn");

    // The person checked the destination and takes the item down by hand:
    // the resolve the message names cancels it.
    let d = db.clone();
    let out = blocking(move || {
        oo(
            &d,
            &[
                "resolve",
                "--job",
                "mail",
                "--key",
                "op",
                "--as",
                "cancelled",
                "--reason",
                "withdrawn by hand",
            ],
        )
    })
    .await;
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(inspect(&db, "mail")["op"]["state"], "cancelled");
}
