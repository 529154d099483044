//! Retention: purge deletes only finished records older than the retention.

use std::time::Duration;

use onceonly::{ops, EffectKind, EffectOutcome, FaultPoint, StalePolicy, State, Store};

use super::support::{all_records, crash_at, guard, order};
use crate::effects::CountingEffect;
use crate::StoreFactory;

const DAY: Duration = Duration::from_secs(24 * 3600);

/// Purge deletes completed, failed and cancelled records older than the
/// retention, of the job type asked for; never claimed, queued or held
/// ones, and no record younger than the retention.
pub async fn purge_deletes_only_old_finished_records<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let dest = CountingEffect::keyed();
    let keyed = guard(&store, "purge", EffectKind::Keyed);
    keyed.run("completed", &order(1), &dest).await.unwrap();
    dest.script(vec![EffectOutcome::Failed("rejected".into())]);
    keyed.run("failed", &order(1), &dest).await.unwrap();
    ops::enqueue(&store, "purge", "cancelled", &order(1), None)
        .await
        .unwrap();
    ops::cancel(&store, "purge", "cancelled", Some(&dest))
        .await
        .unwrap();
    ops::enqueue(&store, "purge", "queued", &order(1), None)
        .await
        .unwrap();
    let dying =
        guard(&store, "purge", EffectKind::Keyed).with_fault_hook(crash_at(FaultPoint::AfterClaim));
    dying.run("claimed", &order(1), &dest).await.unwrap_err();
    let hold = guard(&store, "purge", EffectKind::Opaque(StalePolicy::Hold));
    dest.script(vec![EffectOutcome::Unknown("timed out".into())]);
    hold.run("held", &order(1), &dest).await.unwrap();
    guard(&store, "other", EffectKind::Keyed)
        .run("completed", &order(1), &dest)
        .await
        .unwrap();
    let states = |records: Vec<onceonly::Record>| {
        let mut s: Vec<(String, String, State)> = records
            .into_iter()
            .map(|r| (r.job_type, r.op_key, r.state))
            .collect();
        s.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        s
    };
    assert_eq!(all_records(&store).await.len(), 7);

    // Nothing is old enough yet.
    assert_eq!(
        ops::purge(&store, None, DAY).await.unwrap(),
        0,
        "younger than the retention"
    );

    assert!(!store
        .op_history("purge", "failed")
        .await
        .unwrap()
        .is_empty());
    assert!(!store.op_history("purge", "held").await.unwrap().is_empty());
    store.clock_offset().advance(DAY * 2);
    keyed.run("recent", &order(1), &dest).await.unwrap();
    assert_eq!(
        ops::purge(&store, Some("purge"), DAY).await.unwrap(),
        3,
        "purge's old finished records"
    );
    assert_eq!(
        ops::purge(&store, None, DAY).await.unwrap(),
        1,
        "other's old completed record"
    );
    let left = states(all_records(&store).await);
    let expected = [
        ("purge", "claimed", State::Claimed),
        ("purge", "held", State::Held),
        ("purge", "queued", State::Queued),
        ("purge", "recent", State::Completed),
    ];
    let expected: Vec<(String, String, State)> = expected
        .iter()
        .map(|(j, k, s)| (j.to_string(), k.to_string(), *s))
        .collect();
    assert_eq!(left, expected);
    // A purged record's trail goes with it; a kept record keeps its own.
    assert!(store
        .op_history("purge", "failed")
        .await
        .unwrap()
        .is_empty());
    assert!(store
        .op_history("purge", "cancelled")
        .await
        .unwrap()
        .is_empty());
    assert!(!store.op_history("purge", "held").await.unwrap().is_empty());
}

/// A relay with a retention purges its job type's finished records once
/// they are older than it (the clock moved, not waited for), and nothing
/// younger, held or of another job type.
pub async fn relay_applies_its_retention<F: StoreFactory>(factory: &F) {
    use onceonly::relay::{Relay, RelayConfig};

    let store = factory.fresh().await;
    let dest = CountingEffect::keyed();
    let g = guard(&store, "kept", EffectKind::Keyed);
    g.run("old", &order(1), &dest).await.unwrap();
    guard(&store, "other", EffectKind::Keyed)
        .run("old", &order(1), &dest)
        .await
        .unwrap();
    dest.script(vec![EffectOutcome::Unknown("timed out".into())]);
    guard(&store, "kept", EffectKind::Opaque(StalePolicy::Hold))
        .run("held", &order(1), &dest)
        .await
        .unwrap();
    store.clock_offset().advance(2 * DAY);
    g.run("young", &order(1), &dest).await.unwrap();

    let (_stop_tx, stop) = tokio::sync::watch::channel(false);
    let config = RelayConfig {
        workers: 1,
        drain: true,
        ..RelayConfig::default()
    };
    // Drain: it stops once nothing is queued or claimed (held rows do not count).
    let relay = Relay::new(&g, &dest, config).with_retention(DAY);
    tokio::time::timeout(Duration::from_secs(30), relay.run(stop))
        .await
        .expect("the relay drains")
        .unwrap();
    let mut left: Vec<(String, String)> = all_records(&store)
        .await
        .into_iter()
        .map(|r| (r.job_type, r.op_key))
        .collect();
    left.sort();
    let expected = [("kept", "held"), ("kept", "young"), ("other", "old")];
    assert_eq!(
        left,
        expected.map(|(j, k)| (j.to_owned(), k.to_owned())).to_vec(),
        "only the old finished record of the relay's job type is purged"
    );
}
