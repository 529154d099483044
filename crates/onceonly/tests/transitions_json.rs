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

fn queries(store: &str) -> std::collections::BTreeMap<String, String> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(store)
        .join("queries");
    std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|f| f.expect("a file").path())
        .filter(|p| p.extension().is_some_and(|e| e == "sql"))
        .map(|p| {
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).expect("readable"))
        })
        .collect()
}

/// `Rule::statement` and `Rule::batched` name the query files that run each
/// transition, the batched ones too: each is a file of a store, the main
/// one of the PostgreSQL and SQLite stores (MySQL splits the claim into
/// claim_insert, claim_update, claim_queued), and every PostgreSQL
/// statement that writes the operation table runs a named transition.
#[test]
fn every_rule_names_the_statements_that_run_it() {
    let stores = ["onceonly-postgres", "onceonly-sqlite", "onceonly-mysql"];
    let files: Vec<_> = stores.iter().map(|s| queries(s)).collect();
    let mut named = std::collections::BTreeSet::new();
    for rule in table() {
        for s in rule.batched {
            assert!(
                files.iter().any(|f| f.contains_key(*s)),
                "{}: no store has the statement {s}",
                rule.name
            );
            named.insert(*s);
        }
        for f in &files[..2] {
            assert!(
                f.contains_key(rule.statement),
                "{}: the statement {} is missing",
                rule.name,
                rule.statement
            );
        }
        named.insert(rule.statement);
    }
    for (name, text) in &files[0] {
        let writes_ops =
            text.contains("UPDATE onceonly.ops") || text.contains("INSERT INTO onceonly.ops");
        assert!(
            !writes_ops || named.contains(name.as_str()),
            "PostgreSQL's {name}.sql writes the operation table, but no rule names it"
        );
    }
}
