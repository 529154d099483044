//! `onceonly purge` through the real binary: finished records of the job
//! type asked for go, with their audit trail; claimed, queued and held ones
//! and younger ones stay; bad input is refused and nothing is purged.

mod common;

use std::time::Duration;

use common::*;
use onceonly::ops::{self, Resolution};
use onceonly::store::{OpClaim, OpList};
use onceonly::{EffectFn, EffectKind, EffectOutcome, Guard, JobSpec, Payload, StalePolicy, Store};

fn keys(records: Vec<onceonly::Record>) -> Vec<String> {
    let mut k: Vec<String> = records
        .into_iter()
        .map(|r| format!("{}/{}", r.job_type, r.op_key))
        .collect();
    k.sort();
    k
}

#[tokio::test]
async fn purge_deletes_old_finished_records_and_their_history() {
    let (db, store) = migrated_sqlite().await;
    let payload = Payload::parse("{}").unwrap();
    let done = EffectFn(|_| async { EffectOutcome::done_with_ref("x") });
    let rejected = EffectFn(|_| async { EffectOutcome::Failed("rejected".into()) });
    let unknown = EffectFn(|_| async { EffectOutcome::Unknown("timed out".into()) });
    let keyed = Guard::new(store.clone(), JobSpec::new("mail", EffectKind::Keyed)).unwrap();
    keyed.run("done", &payload, &done).await.unwrap();
    keyed.run("failed", &payload, &rejected).await.unwrap();
    let hold = JobSpec::new("mail", EffectKind::Opaque(StalePolicy::Hold));
    let held = Guard::new(store.clone(), hold).unwrap();
    held.run("held", &payload, &unknown).await.unwrap();
    held.run("resolved", &payload, &unknown).await.unwrap();
    let resolution = Resolution::Cancelled;
    ops::resolve(&store, "mail", "resolved", &resolution, "gone", None)
        .await
        .unwrap();
    ops::enqueue(&store, "mail", "queued", &payload, None)
        .await
        .unwrap();
    let claim = OpClaim {
        job_type: "mail",
        op_key: "claimed",
        fingerprint: &payload.fingerprint,
        payload: None,
        owner: "w",
        lease: Duration::from_secs(30),
    };
    store.op_claim(&claim).await.unwrap();
    keyed.run("other-job", &payload, &done).await.unwrap();
    Guard::new(store.clone(), JobSpec::new("sms", EffectKind::Keyed))
        .unwrap()
        .run("done", &payload, &done)
        .await
        .unwrap();
    assert!(!store
        .op_history("mail", "resolved")
        .await
        .unwrap()
        .is_empty());

    // Nothing is an hour old yet.
    let out = oo(&db, &["purge", "--older-than", "1h", "--job", "mail"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("purged 0 finished records"),
        "{}",
        text(&out)
    );

    // Bad input: refused, nothing purged.
    for bad in [
        &["purge", "--older-than", "soon"][..],
        &["purge", "--older-than", "0s", "--job", "no spaces"][..],
        &["purge"][..],
    ] {
        let out = oo(&db, bad);
        assert!(!out.status.success(), "{bad:?}: {}", text(&out));
    }
    assert_eq!(store.op_list(&OpList::default()).await.unwrap().len(), 8);

    // Inside the redelivery horizon (the default lease, 30s): refused,
    // naming both durations and the job; nothing purged.
    let out = oo(&db, &["purge", "--older-than", "0s", "--job", "mail"]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains(
            "purge --older-than 0s is shorter than the redelivery horizon, 30s of job mail"
        ) && text(&out).contains("--force"),
        "{}",
        text(&out)
    );
    assert_eq!(store.op_list(&OpList::default()).await.unwrap().len(), 8);

    // --force purges anyway, and the audit trail says so.
    let out = oo(
        &db,
        &["purge", "--older-than", "0s", "--job", "mail", "--force"],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("purged 4 finished records"),
        "{}",
        text(&out)
    );
    let out = oo(&db, &["history", "--purges", "--job", "mail", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let events: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events.len(), 1, "{}", text(&out));
    assert_eq!(events[0]["event"], "purged");
    assert_eq!(events[0]["actor"], "onceonly purge --force");
    let detail = events[0]["detail"].as_str().unwrap();
    assert!(
        detail.contains("purged 4 finished records not updated for 0s")
            && detail.contains("inside the redelivery horizon 30s of job mail"),
        "{detail}"
    );
    assert_eq!(
        keys(store.op_list(&OpList::default()).await.unwrap()),
        ["mail/claimed", "mail/held", "mail/queued", "sms/done"],
        "claimed, queued, held and other job types stay"
    );
    assert!(
        store
            .op_history("mail", "resolved")
            .await
            .unwrap()
            .is_empty(),
        "the audit trail goes with its record"
    );
    assert!(!store.op_history("mail", "held").await.unwrap().is_empty());
}

/// Ages every record of the file by `by`, as if that long had passed.
async fn age(store: &onceonly_sqlite::SqliteStore, by: Duration) {
    sqlx::query("UPDATE onceonly_ops SET updated_at = updated_at - ?1")
        .bind(by.as_millis() as i64)
        .execute(store.pool())
        .await
        .unwrap();
}

#[tokio::test]
async fn purge_keeps_what_the_settings_files_horizon_needs_and_purges_what_is_older() {
    let (db, store) = migrated_sqlite().await;
    let payload = Payload::parse("{}").unwrap();
    let done = EffectFn(|_| async { EffectOutcome::done_with_ref("x") });
    let keyed = Guard::new(store.clone(), JobSpec::new("mail", EffectKind::Keyed)).unwrap();
    keyed.run("a", &payload, &done).await.unwrap();
    keyed.run("b", &payload, &done).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("onceonly.toml");
    std::fs::write(
        &config,
        "[jobs.mail]\neffect = \"keyed\"\nlease = \"1m\"\ntimeout = \"10s\"\nredelivery_timeout = \"5m\"\n",
    )
    .unwrap();
    let config = config.to_str().unwrap();

    // Older than the lease, not than the queue's redelivery timeout.
    age(&store, Duration::from_secs(180)).await;
    let out = oo(&db, &["purge", "--older-than", "2m", "--config", config]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("purge --older-than 2m is shorter than the redelivery horizon, 5m of job mail (its redelivery_timeout in"),
        "{}",
        text(&out)
    );
    assert_eq!(store.op_list(&OpList::default()).await.unwrap().len(), 2);

    // Past the horizon: purged, and nothing forced to record.
    age(&store, Duration::from_secs(3600)).await;
    let out = oo(&db, &["purge", "--older-than", "10m", "--config", config]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("purged 2 finished records"),
        "{}",
        text(&out)
    );
    assert!(!text(&out).contains("audit trail"), "{}", text(&out));
    let out = oo(&db, &["history", "--purges", "--json"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "", "{}", text(&out));
}

#[tokio::test]
async fn a_live_claims_stored_lease_widens_the_horizon() {
    let (db, store) = migrated_sqlite().await;
    let payload = Payload::parse("{}").unwrap();
    let claim = OpClaim {
        job_type: "report",
        op_key: "long",
        fingerprint: &payload.fingerprint,
        payload: None,
        owner: "w",
        lease: Duration::from_secs(2 * 3600),
    };
    store.op_claim(&claim).await.unwrap();
    let out = oo(&db, &["purge", "--older-than", "1h"]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("shorter than the redelivery horizon, 2h of job report (the lease stored on its live claim long)"),
        "{}",
        text(&out)
    );
    let out = oo(&db, &["purge", "--older-than", "3h"]);
    assert!(out.status.success(), "{}", text(&out));
}
