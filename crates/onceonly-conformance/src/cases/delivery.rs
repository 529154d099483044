//! The conformance cases. Each takes a [`StoreFactory`], makes its own
//! database, and asserts effect counts and record states.

use onceonly::{EffectKind, Guard, JobSpec, Outcome, Payload, State};

use crate::effects::CountingEffect;
use crate::StoreFactory;

/// The same operation delivered 3 times in a row: 1 effect, 1 completed record.
pub async fn same_message_three_times<F: StoreFactory>(factory: &F) {
    let store = factory.fresh().await;
    let guard = Guard::new(store.clone(), JobSpec::new("send", EffectKind::Keyed)).unwrap();
    let effect = CountingEffect::opaque();
    let payload = Payload::parse(r#"{"order": 1}"#).unwrap();
    let mut repeats = 0;
    for _ in 0..3 {
        match guard.run("order-1", &payload, &effect).await.unwrap() {
            Outcome::Done { repeat, .. } => repeats += usize::from(repeat),
            other => panic!("expected done, got {other:?}"),
        }
    }
    assert_eq!(effect.count("order-1"), 1, "effects");
    assert_eq!(repeats, 2, "two deliveries were repeats");
    let snap = onceonly::ops::get(&store, "send", "order-1").await.unwrap();
    assert_eq!(snap.record.state, State::Completed);
    assert_eq!(snap.record.attempts, 1);
}
