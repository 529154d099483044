//! `onceonly held`, `stuck` and `resolve` through the real binary, on SQLite
//! and PostgreSQL. Held and stuck rows are made the way a dead worker
//! leaves them: a claim whose lease ran out, taken over into held.

mod common;

use std::time::Duration;

use common::*;
use onceonly::store::{ClaimRow, OpClaim, OpTakeOver};
use onceonly::{Payload, State, Store};
use serde_json::Value;

/// A claim by `owner` whose lease is already over (a worker that died);
/// returns its token.
async fn dead_claim<S: Store>(store: &S, job: &str, key: &str, owner: &str) -> i64 {
    let payload = Payload::none();
    let claim = store
        .op_claim(&OpClaim {
            job_type: job,
            op_key: key,
            fingerprint: &payload.fingerprint,
            payload: payload.json.as_deref(),
            owner,
            lease: Duration::ZERO,
        })
        .await
        .unwrap();
    match claim {
        ClaimRow::Claimed(c) => c.token,
        other => panic!("{job}:{key}: expected a fresh claim, got {other:?}"),
    }
}

/// An operation held for a person after its worker died; returns its token.
async fn held<S: Store>(store: &S, job: &str, key: &str) -> i64 {
    let stale = dead_claim(store, job, key, "worker-dead").await;
    let taken = store
        .op_take_over(&OpTakeOver {
            job_type: job,
            op_key: key,
            stale_token: stale,
            to: State::Held,
            owner: "worker-sweeper",
            lease: Duration::from_secs(30),
            reason: "lease over, outcome unknown: held for a person",
        })
        .await
        .unwrap();
    assert!(taken.is_some(), "{job}:{key}: the take-over into held");
    stale + 1
}

fn json_lines(out: &std::process::Output) -> Vec<Value> {
    assert!(out.status.success(), "{}", text(out));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

fn keys(lines: &[Value]) -> Vec<&str> {
    lines.iter().map(|v| v["key"].as_str().unwrap()).collect()
}

async fn held_and_stuck_are_listed_oldest_first<S: Store>(db: &str, store: &S) {
    let job = unique_job("held");
    let other = unique_job("held-other");
    // Older first, named so that key order would put them the other way.
    // The rows are written on a clock a minute behind (the binary reads on
    // the real one), moved on by a second between the older and the newer.
    store.clock_offset().rewind(Duration::from_secs(60));
    dead_claim(store, &job, "z-stuck-old", "worker-1").await;
    store.clock_offset().advance(Duration::from_secs(1));
    dead_claim(store, &job, "a-stuck-new", "worker-2").await;
    held(store, &job, "y-held-old").await;
    store.clock_offset().advance(Duration::from_secs(1));
    held(store, &job, "b-held-new").await;
    held(store, &other, "elsewhere").await;
    store.clock_offset().advance(Duration::from_secs(58));
    // A live claim is neither stuck nor held.
    let payload = Payload::none();
    store
        .op_claim(&OpClaim {
            job_type: &job,
            op_key: "live",
            fingerprint: &payload.fingerprint,
            payload: None,
            owner: "worker-live",
            lease: Duration::from_secs(600),
        })
        .await
        .unwrap();

    let stuck = json_lines(&oo(db, &["stuck", "--job", &job, "--json"]));
    assert_eq!(keys(&stuck), ["z-stuck-old", "a-stuck-new"], "{stuck:?}");
    let s = &stuck[0];
    assert_eq!(s["state"], "claimed");
    assert_eq!(s["owner"], "worker-1");
    assert_eq!(s["attempts"], 1);
    assert_eq!(s["token"], 1);
    assert_eq!(s["lease_ms"], 0);
    assert!(s["age_ms"].as_i64().unwrap() >= 20, "{s}");
    assert!(
        s["age_ms"].as_i64().unwrap() < 120_000,
        "age from the database's clock: {s}"
    );
    assert!(s["over_lease_ms"].as_i64().is_some(), "{s}");
    for field in ["external_ref", "error", "claimed_at", "lease_until", "now"] {
        assert!(s.get(field).is_some(), "{field} missing: {s}");
    }

    let held_rows = json_lines(&oo(db, &["held", "--job", &job, "--json"]));
    assert_eq!(
        keys(&held_rows),
        ["y-held-old", "b-held-new"],
        "{held_rows:?}"
    );
    let h = &held_rows[0];
    assert_eq!(h["state"], "held");
    assert_eq!(h["owner"], "worker-sweeper");
    assert_eq!(h["token"], 2);
    assert_eq!(
        h["error"], "lease over, outcome unknown: held for a person",
        "{h}"
    );

    // Without --job, other job types show too (the database is shared).
    let all = json_lines(&oo(db, &["held", "--json"]));
    assert!(keys(&all).contains(&"elsewhere"));

    // The table for people.
    let out = oo(db, &["held", "--job", &job]);
    assert!(out.status.success(), "{}", text(&out));
    let table = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = table.lines().collect();
    assert!(
        lines[0].contains("owner") && lines[0].contains("age"),
        "{table}"
    );
    assert!(lines[1].contains("y-held-old") && lines[1].contains("worker-sweeper"));
    assert!(lines[2].contains("b-held-new"), "{table}");
    assert!(table.contains("2 held"), "{table}");
    let out = oo(db, &["stuck", "--job", &job]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("z-stuck-old") && table.contains("worker-1"),
        "{table}"
    );
    assert!(table.contains("2 stuck"), "{table}");

    // Nothing of an unknown job type.
    let none = json_lines(&oo(db, &["stuck", "--job", &unique_job("none"), "--json"]));
    assert!(none.is_empty());
    for (which, says) in [("stuck", "no stuck claims"), ("held", "no held operations")] {
        let out = oo(db, &[which, "--job", &unique_job("none")]);
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), says);
    }
}

async fn resolve_every_way<S: Store>(db: &str, store: &S) {
    let job = unique_job("resolve");
    for key in ["done", "redo", "give-up", "drop"] {
        held(store, &job, key).await;
    }
    let resolve = |key: &str, extra: &[&str]| {
        let mut args = vec!["resolve", "--job", &job, "--key", key];
        args.extend_from_slice(extra);
        oo(db, &args)
    };
    let out = resolve(
        "done",
        &[
            "--as",
            "completed",
            "--ref",
            "msg-42",
            "--reason",
            "found it in the provider's log",
            "--token",
            "2",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("resolved as completed"),
        "{}",
        text(&out)
    );
    for (key, to) in [
        ("redo", "queued"),
        ("give-up", "failed"),
        ("drop", "cancelled"),
    ] {
        let out = resolve(key, &["--as", to, "--reason", "checked by hand"]);
        assert!(out.status.success(), "{key}: {}", text(&out));
    }
    let rows = inspect(db, &job);
    assert_eq!(rows["done"]["state"], "completed");
    assert_eq!(rows["done"]["external_ref"], "msg-42");
    assert!(
        rows["done"]["error"]
            .as_str()
            .unwrap()
            .contains("found it in the provider's log"),
        "{}",
        rows["done"]
    );
    assert_eq!(rows["redo"]["state"], "queued");
    assert_eq!(rows["give-up"]["state"], "failed");
    assert_eq!(rows["drop"]["state"], "cancelled");

    // Not held any more: refused, nothing changed.
    let out = resolve("give-up", &["--as", "queued", "--reason", "again"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("is not held"), "{}", text(&out));
    assert_eq!(inspect(db, &job)["give-up"]["state"], "failed");

    // Unknown operation, --ref without completed, empty reason.
    let out = resolve("nope", &["--as", "failed", "--reason", "x"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("no operation"), "{}", text(&out));
    held(store, &job, "strict").await;
    let out = resolve("strict", &["--as", "failed", "--ref", "r", "--reason", "x"]);
    assert!(!out.status.success());
    assert!(text(&out).contains("--as completed"), "{}", text(&out));
    let out = resolve("strict", &["--as", "failed", "--reason", " "]);
    assert!(!out.status.success());
    assert_eq!(inspect(db, &job)["strict"]["state"], "held");
}

/// The row moves between the person's look and the resolve: resolved as
/// queued by someone else, claimed again, and held again (a new token). The
/// person's resolve, fenced on the token they saw, is refused.
async fn a_resolve_that_races_a_change_is_refused<S: Store>(db: &str, store: &S) {
    let job = unique_job("race");
    held(store, &job, "op").await;
    let seen = json_lines(&oo(db, &["held", "--job", &job, "--json"]));
    let token = seen[0]["token"].as_i64().unwrap();
    assert_eq!(token, 2);

    // Meanwhile: another person queues it, a worker claims it and dies, and
    // the sweeper holds it again.
    let out = oo(
        db,
        &[
            "resolve",
            "--job",
            &job,
            "--key",
            "op",
            "--as",
            "queued",
            "--reason",
            "colleague",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let again = dead_claim(store, &job, "op", "worker-3").await;
    store
        .op_take_over(&OpTakeOver {
            job_type: &job,
            op_key: "op",
            stale_token: again,
            to: State::Held,
            owner: "worker-sweeper",
            lease: Duration::from_secs(30),
            reason: "held again",
        })
        .await
        .unwrap()
        .expect("held again");
    let before = inspect(db, &job)["op"].clone();
    assert_eq!(
        (before["state"].as_str(), before["token"].as_i64()),
        (Some("held"), Some(4))
    );

    let out = oo(
        db,
        &[
            "resolve",
            "--job",
            &job,
            "--key",
            "op",
            "--as",
            "completed",
            "--ref",
            "msg-1",
            "--reason",
            "I saw it sent",
            "--token",
            &token.to_string(),
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = text(&out);
    assert!(said.contains("moved since you looked"), "{said}");
    assert!(
        said.contains("you saw token 2") && said.contains("token 4"),
        "{said}"
    );
    assert_eq!(inspect(db, &job)["op"], before, "nothing changed");

    // Two people resolve the same held row at once: exactly one wins.
    for i in 0..4 {
        let key = format!("both-{i}");
        let t = held(store, &job, &key).await.to_string();
        let args = |to: &'static str| {
            vec![
                "resolve".to_owned(),
                "--job".into(),
                job.clone(),
                "--key".into(),
                key.clone(),
                "--as".into(),
                to.into(),
                "--reason".into(),
                "race".into(),
                "--token".into(),
                t.clone(),
            ]
        };
        let (a, b) = (args("failed"), args("queued"));
        let db_a = db.to_owned();
        let db_b = db.to_owned();
        let ja = std::thread::spawn(move || {
            let a: Vec<&str> = a.iter().map(String::as_str).collect();
            oo(&db_a, &a)
        });
        let jb = std::thread::spawn(move || {
            let b: Vec<&str> = b.iter().map(String::as_str).collect();
            oo(&db_b, &b)
        });
        let (a, b) = (ja.join().unwrap(), jb.join().unwrap());
        let won: Vec<bool> = [&a, &b].iter().map(|o| o.status.success()).collect();
        assert_eq!(
            won.iter().filter(|w| **w).count(),
            1,
            "exactly one resolve wins:\n{}\n{}",
            text(&a),
            text(&b)
        );
        let loser = if won[0] { &b } else { &a };
        assert_eq!(loser.status.code(), Some(1), "{}", text(loser));
        let state = inspect(db, &job)[&key]["state"].clone();
        assert_eq!(state, if won[0] { "failed" } else { "queued" });
    }
}

async fn all<S: Store>(db: &str, store: S) {
    held_and_stuck_are_listed_oldest_first(db, &store).await;
    resolve_every_way(db, &store).await;
    a_resolve_that_races_a_change_is_refused(db, &store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_stuck_resolve_on_sqlite() {
    let (db, store) = migrated_sqlite().await;
    all(&db, store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_stuck_resolve_on_postgres() {
    let Some((url, store)) = migrated_postgres("held_stuck_resolve_on_postgres").await else {
        return;
    };
    all(&url, store).await;
}
