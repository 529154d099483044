//! `protocol/transitions.json` is the transition table and the policies of
//! `onceonly::protocol`, for clients in other languages to check
//! themselves against. This test keeps the file equal to the definition;
//! `ONCEONLY_BLESS=1 cargo test -p onceonly --test transitions_json`
//! rewrites it after a change.

use std::path::PathBuf;

use onceonly::protocol::{cancel_unsent, policy_table, table, unclaimed_may_have_acted, Move};
use onceonly::{AuditKind, State};
use serde_json::{json, Value};

fn generated() -> Value {
    let cancel_unsent: Vec<Value> = [(1, false), (1, true), (2, false), (2, true)]
        .into_iter()
        .map(|(attempts, looked_up)| {
            json!({
                "attempts": attempts,
                "looked_up": looked_up,
                "move": cancel_unsent(attempts, looked_up).rule().name,
            })
        })
        .collect();
    let operator_cancel: Vec<Value> = [0, 1, 2]
        .into_iter()
        .map(|attempts| {
            json!({
                "attempts": attempts,
                "looks_up_first": unclaimed_may_have_acted(attempts),
            })
        })
        .collect();
    let audit_events: Vec<Value> = AuditKind::ALL
        .into_iter()
        .map(|kind| {
            json!({
                "name": kind.as_str(),
                "after": kind.after().iter().map(|t| t.name()).collect::<Vec<_>>(),
                "on": if kind.on_refusal() { "refused" } else { "moved" },
                "attempt": kind.carries_attempt(),
            })
        })
        .collect();
    let not_looked_up: Vec<Value> = [State::Queued, State::Failed]
        .into_iter()
        .map(|from| {
            json!({
                "from": from,
                "move": Move::cancel_not_looked_up(from).map(|m| m.rule().name),
            })
        })
        .collect();
    json!({
        "about": "The onceonly protocol's transitions, generated from crates/onceonly/src/protocol (see protocol/README.md). Do not edit: run ONCEONLY_BLESS=1 cargo test -p onceonly --test transitions_json.",
        "states": State::ALL,
        "transitions": table(),
        "policy": policy_table(),
        "cancel_unsent": cancel_unsent,
        "operator_cancel_of_queued_or_failed": operator_cancel,
        "audit_events": audit_events,
        "operator_cancel_not_looked_up": not_looked_up,
    })
}

#[test]
fn transitions_json_is_the_definition() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../protocol/transitions.json");
    let text = serde_json::to_string_pretty(&generated()).unwrap() + "\n";
    if std::env::var("ONCEONLY_BLESS").as_deref() == Ok("1") {
        std::fs::write(&path, &text).unwrap();
    }
    let stored = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        stored == text,
        "{} differs from onceonly::protocol; rerun with ONCEONLY_BLESS=1 and commit it",
        path.display()
    );
}
