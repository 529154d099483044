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

    let out = oo(&db, &["purge", "--older-than", "0s", "--job", "mail"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("purged 4 finished records"),
        "{}",
        text(&out)
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
