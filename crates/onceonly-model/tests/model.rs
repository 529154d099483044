//! The checker keeps every invariant on the protocol as it is, and finds
//! each planted bug: the relay's old shutdown release, a completion without
//! its token fence, and the operator's old cancel of a claimed-before row.

use onceonly::{EffectKind, StalePolicy};
use onceonly_model::checker::{
    CANCELLED_NOTHING_LIVE, CANCEL_HELD_UNLOOKED, CANCEL_NOT_DROPPED, CANCEL_WITHDREW_EARLIER,
    NO_STALE_WRITE,
};
use onceonly_model::{check, Bounds, Bug};

/// Small enough for a debug build; CI's step runs the full bound.
fn small() -> Bounds {
    Bounds {
        workers: 2,
        deliveries: 2,
        crashes: 1,
        heartbeats: 1,
        cancels: 1,
        shutdowns: 1,
        expiries: 1,
    }
}

#[test]
fn every_kind_keeps_every_invariant() {
    for kind in [
        EffectKind::Local,
        EffectKind::Keyed,
        EffectKind::Lookup,
        EffectKind::Opaque(StalePolicy::Hold),
        EffectKind::Opaque(StalePolicy::AtLeastOnce),
        EffectKind::Opaque(StalePolicy::AtMostOnce),
    ] {
        let r = check(kind, small(), None);
        assert!(r.violations.is_empty(), "{kind}: {:#?}", r.violations);
        assert!(r.unique_states > 5, "{kind}: {r:?}");
        if kind != EffectKind::Local {
            for reached in ["completed", "a stale claim taken over", "cancelled"] {
                assert!(
                    r.reached.contains(&reached),
                    "{kind} never {reached}: {r:?}"
                );
            }
        }
    }
}

#[test]
fn the_old_relay_release_is_found() {
    let r = check(EffectKind::Keyed, small(), Some(Bug::ReleaseIgnoresCancel));
    let broken: Vec<_> = r.violations.iter().map(|(name, _)| *name).collect();
    assert!(broken.contains(&CANCEL_NOT_DROPPED), "{r:#?}");
    let (_, steps) = r
        .violations
        .iter()
        .find(|(n, _)| *n == CANCEL_NOT_DROPPED)
        .unwrap();
    // The counterexample: a claim, a cancel request, then the shutdown release.
    let at = |step: &str| steps.iter().position(|s| s.starts_with(step));
    assert!(at("CancelWrite") < at("GiveBack"), "{steps:?}");
}

#[test]
fn a_completion_without_its_token_fence_is_found() {
    let r = check(EffectKind::Keyed, small(), Some(Bug::CompleteIgnoresToken));
    let broken: Vec<_> = r.violations.iter().map(|(name, _)| *name).collect();
    assert!(broken.contains(&NO_STALE_WRITE), "{r:#?}");
}

/// The operator's cancel as it was (a queued or failed row cancelled at
/// once, whatever earlier claims sent) is found: cancelled, with the item
/// an earlier claim sent still live.
#[test]
fn the_old_operator_cancel_is_found() {
    let r = check(EffectKind::Keyed, small(), Some(Bug::CancelSkipsLookup));
    let (_, steps) = r
        .violations
        .iter()
        .find(|(n, _)| *n == CANCELLED_NOTHING_LIVE)
        .unwrap_or_else(|| panic!("not found: {r:#?}"));
    // The counterexample: an effect sent, the claim given back, then the cancel.
    let at = |step: &str| steps.iter().position(|s| s.starts_with(step));
    assert!(at("Perform") < at("CancelWrite"), "{steps:?}");
}

/// Where the destination looks up, the operator's cancel of such a row
/// withdraws the item an earlier claim sent (the new path is explored).
#[test]
fn a_cancel_after_a_claim_withdraws_what_it_sent() {
    let r = check(EffectKind::Lookup, small(), None);
    assert!(r.violations.is_empty(), "{:#?}", r.violations);
    assert!(r.reached.contains(&CANCEL_WITHDREW_EARLIER), "{r:?}");
}

/// Where the destination cannot look up, the operator's cancel of a queued
/// row an earlier claim may have sent holds it (its retry stopped) instead
/// of doing nothing; every invariant holds on that path too.
#[test]
fn a_cancel_that_cannot_look_holds_a_queued_row() {
    for kind in [
        EffectKind::Keyed,
        EffectKind::Opaque(StalePolicy::AtLeastOnce),
    ] {
        let r = check(kind, small(), None);
        assert!(r.violations.is_empty(), "{:#?}", r.violations);
        assert!(r.reached.contains(&CANCEL_HELD_UNLOOKED), "{r:?}");
    }
}
